import Glibc

/// A `pthread_mutex_t` with a condition variable, for state that non-Sendable values share
/// across threads (a weak delegate, a callback in progress).
///
/// `Synchronization.Mutex` hands its value out as `sending`, which a weak reference to a
/// caller's non-Sendable delegate cannot be; this lock guards plain stored properties instead.
/// Every pthread call is checked: a failure means memory corruption or a lock used wrongly
/// (unlocked by another thread), and going on would break what the lock protects.
final class Lock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        var attributes = pthread_mutexattr_t()
        Self.check(pthread_mutexattr_init(&attributes), "pthread_mutexattr_init")
        #if DEBUG
            // Debug builds catch relocking and unlocking from the wrong thread.
            Self.check(
                pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK)), "pthread_mutexattr_settype")
        #endif
        Self.check(pthread_mutex_init(mutex, &attributes), "pthread_mutex_init")
        Self.check(pthread_mutexattr_destroy(&attributes), "pthread_mutexattr_destroy")
        // Timed waits measure monotonic time, so a change of the wall clock cannot stretch them.
        var conditionAttributes = pthread_condattr_t()
        Self.check(pthread_condattr_init(&conditionAttributes), "pthread_condattr_init")
        Self.check(pthread_condattr_setclock(&conditionAttributes, CLOCK_MONOTONIC), "pthread_condattr_setclock")
        Self.check(pthread_cond_init(condition, &conditionAttributes), "pthread_cond_init")
        Self.check(pthread_condattr_destroy(&conditionAttributes), "pthread_condattr_destroy")
    }

    deinit {
        Self.check(pthread_cond_destroy(condition), "pthread_cond_destroy")
        Self.check(pthread_mutex_destroy(mutex), "pthread_mutex_destroy")
        condition.deallocate()
        mutex.deallocate()
    }

    func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
        defer { Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock") }
        return try body()
    }

    /// Waits on the condition; call only inside ``withLock(_:)``.
    func wait() {
        Self.check(pthread_cond_wait(condition, mutex), "pthread_cond_wait")
    }

    /// Waits on the condition for at most `nanoseconds`; call only inside ``withLock(_:)``.
    func wait(nanoseconds: UInt64) {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let total = UInt64(deadline.tv_nsec) + nanoseconds
        deadline.tv_sec += Int(total / 1_000_000_000)
        deadline.tv_nsec = Int(total % 1_000_000_000)
        let result = pthread_cond_timedwait(condition, mutex, &deadline)
        if result != ETIMEDOUT { Self.check(result, "pthread_cond_timedwait") }
    }

    /// Wakes every waiter; call inside ``withLock(_:)``.
    func broadcast() {
        Self.check(pthread_cond_broadcast(condition), "pthread_cond_broadcast")
    }

    /// pthread functions return an error number rather than setting `errno`.
    @inline(__always)
    private static func check(_ result: Int32, _ function: StaticString) {
        precondition(result == 0, "\(function) failed with error \(result)")
    }
}
