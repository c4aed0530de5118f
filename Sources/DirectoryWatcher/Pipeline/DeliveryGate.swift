import Glibc
import Synchronization

/// Lets callbacks through until it is closed, and lets closing wait for a callback in progress
/// where waiting is safe.
///
/// Every delivery passes ``enter()`` and ``leave()``. ``close(waiting:)`` shuts the gate; from
/// outside the library's callbacks (see ``CallbackContext``) it then waits until no callback is
/// running. Inside a callback it never waits: the callback running on another thread may be
/// waiting for this one (two watchers invalidating each other from their callbacks), and a
/// callback cannot wait for itself. Waiting on a lock rather than with `DispatchQueue.sync`
/// matters: a watcher whose queue targets the caller's queue would deadlock.
final class DeliveryGate: @unchecked Sendable {
    private let lock = Lock()
    /// Written under `lock`; read without it by ``isOpen``, which every batch asks between its
    /// two callbacks.
    private let open = Atomic(true)
    // Under `lock`.
    /// A callback is running. The delivery queue is serial, so there is at most one.
    @exclusivity(unchecked) private var running = false
    /// Closers waiting for the callback in progress to leave.
    @exclusivity(unchecked) private var waiters = 0
    /// Blocks to run once the callback in progress has left (``whenIdle(_:)``).
    @exclusivity(unchecked) private var idleBlocks: [@Sendable () -> Void] = []

    /// Acquiring: a close that happened before (in the callback that just returned, or on a
    /// thread that has told this one) is seen.
    var isOpen: Bool { open.load(ordering: .acquiring) }

    /// Starts a callback; false when the gate is closed and the callback must not run.
    func enter() -> Bool {
        lock.withLock {
            guard open.load(ordering: .relaxed) else { return false }
            running = true
            return true
        }
    }

    func leave() {
        let blocks = lock.withLock { () -> [@Sendable () -> Void] in
            running = false
            if waiters > 0 { lock.broadcast() }
            guard !idleBlocks.isEmpty else { return [] }
            defer { idleBlocks = [] }
            return idleBlocks
        }
        for block in blocks { block() }
    }

    /// Closes the gate; true for the first call. Waits for a callback running on another thread
    /// when `waiting` is true and the caller is outside every callback of the library.
    @discardableResult
    func close(waiting: Bool) -> Bool {
        let mayWait = waiting && !CallbackContext.isActive
        return lock.withLock {
            let wasOpen = open.exchange(false, ordering: .releasing)
            if mayWait && running {
                waiters += 1
                while running { lock.wait() }
                waiters -= 1
            }
            return wasOpen
        }
    }

    /// Runs `block` once no callback is running: at once on the calling thread when none is, or
    /// on the callback's thread right after it leaves.
    func whenIdle(_ block: @escaping @Sendable () -> Void) {
        let now = lock.withLock { () -> Bool in
            if !running { return true }
            idleBlocks.append(block)
            return false
        }
        if now { block() }
    }
}
