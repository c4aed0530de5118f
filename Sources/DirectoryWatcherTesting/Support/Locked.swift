import Glibc

/// A value behind a pthread mutex, for the kit's state shared with the loop's threads. Not
/// `Synchronization.Mutex`: on Linux a contended `Mutex` is handed over through the kernel
/// (priority-inheriting futexes), which ThreadSanitizer cannot see, so it reports races between
/// accesses made under the lock (a change log's wait and its append, once).
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
