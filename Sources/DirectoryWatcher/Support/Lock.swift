import CDirectoryWatcherShims

/// A mutex with a condition, for state that non-Sendable values share across threads (a weak
/// delegate, a callback in progress).
///
/// `Synchronization.Mutex` hands its value out as `sending`, which a weak reference to a
/// caller's non-Sendable delegate cannot be; this lock guards plain stored properties instead.
/// It is a futex word (`cdw_lock`, in the C shims): a wake-up of the loop takes several locks,
/// none of them contended as a rule, and an uncontended lock and unlock are an atomic
/// instruction each, a fifth of a `pthread_mutex_t`'s cost. Misuse stops the process with a
/// message rather than deadlocking or breaking what the lock protects: in every build an unlock
/// of a free lock, and in debug builds, as an error-checking pthread mutex would, a thread locking
/// what it holds or unlocking what another holds.
final class Lock: @unchecked Sendable {
    private let word = UnsafeMutablePointer<cdw_lock>.allocate(capacity: 1)

    init() {
        word.initialize(to: cdw_lock())
    }

    deinit {
        word.deallocate()
    }

    @inline(__always)
    func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        cdw_lock_acquire(word)
        defer { cdw_lock_release(word) }
        return try body()
    }

    /// Waits for a ``broadcast()``; call only inside ``withLock(_:)``. May return without one:
    /// check the condition again.
    func wait() {
        cdw_lock_wait(word, -1)
    }

    /// Waits for a ``broadcast()`` for at most `nanoseconds` (monotonic time, so a change of the
    /// wall clock cannot stretch it); call only inside ``withLock(_:)``.
    func wait(nanoseconds: UInt64) {
        cdw_lock_wait(word, Int64(clamping: nanoseconds))
    }

    /// Wakes every waiter; call inside ``withLock(_:)``.
    func broadcast() {
        cdw_lock_broadcast(word)
    }
}
