import Glibc

/// Lets callbacks through until it is closed, and makes closing wait for a callback in progress.
///
/// Every delivery passes ``enter()`` and ``leave()``. ``close()`` shuts the gate and then waits
/// until no callback is running, unless the running callback is the caller itself (`invalidate()`
/// inside a callback), which must not wait for itself. Waiting on a lock rather than with
/// `DispatchQueue.sync` matters: a watcher whose queue targets the caller's queue would deadlock.
final class DeliveryGate: @unchecked Sendable {
    private let lock = Lock()
    private var open = true
    /// The thread running a callback now. The delivery queue is serial, so there is at most one.
    private var runner: pthread_t?

    var isOpen: Bool { lock.withLock { open } }

    /// Starts a callback; false when the gate is closed and the callback must not run.
    func enter() -> Bool {
        lock.withLock {
            guard open else { return false }
            runner = pthread_self()
            return true
        }
    }

    func leave() {
        lock.withLock {
            runner = nil
            lock.broadcast()
        }
    }

    /// Closes the gate; returns once no callback runs on another thread. True for the first call.
    @discardableResult
    func close() -> Bool {
        lock.withLock {
            let wasOpen = open
            open = false
            while let runner, pthread_equal(runner, pthread_self()) == 0 {
                lock.wait()
            }
            return wasOpen
        }
    }
}
