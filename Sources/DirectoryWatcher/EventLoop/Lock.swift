import Glibc

/// A `pthread_mutex_t` with a condition variable, for state that non-Sendable values share
/// across threads (a weak delegate, a callback in progress).
///
/// `Synchronization.Mutex` hands its value out as `sending`, which a weak reference to a
/// caller's non-Sendable delegate cannot be; this lock guards plain stored properties instead.
final class Lock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits on the condition; call only inside ``withLock(_:)``.
    func wait() {
        pthread_cond_wait(condition, mutex)
    }

    /// Wakes every waiter; call inside ``withLock(_:)``.
    func broadcast() {
        pthread_cond_broadcast(condition)
    }
}
