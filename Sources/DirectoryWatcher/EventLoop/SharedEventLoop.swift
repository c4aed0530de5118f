import Synchronization

/// The process's shared loop: started by the first watcher, stopped when the last one leaves.
///
/// Reference counted rather than kept for the life of the process, so a process that watches
/// nothing has no thread and no descriptors of ours, and creating and invalidating any number of
/// watchers leaves both counts where they were.
enum SharedEventLoop {
    private final class State: @unchecked Sendable {
        let lock = Lock()
        var loop: EventLoop?
        var users = 0
        /// The loops stopped and perhaps still exiting, for ``waitUntilStopped()``: those whose
        /// threads a Dispatch worker joins may exit after a later one.
        var stopped: [EventLoop] = []
    }

    private static let state = State()

    static func acquire() throws(SyscallError) -> EventLoop {
        try state.lock.withLock { () throws(SyscallError) -> EventLoop in
            if let loop = state.loop {
                state.users += 1
                return loop
            }
            // Without inotify (none in the kernel, the user's instances used up), polled
            // watchers are still served: an automatic backend polls then.
            let loop = try EventLoop(startsWithoutInotify: true)
            state.loop = loop
            state.users = 1
            return loop
        }
    }

    /// Lets go of the loop; the last user stops it, and joins its threads when `waiting` (see
    /// ``EventLoop/shutdown(waiting:)``).
    static func release(waiting: Bool = true) {
        let last = state.lock.withLock { () -> EventLoop? in
            state.users -= 1
            guard state.users == 0 else { return nil }
            defer { state.loop = nil }
            state.stopped.removeAll { $0.hasExited }
            if let loop = state.loop { state.stopped.append(loop) }
            return state.loop
        }
        // Outside the lock: joining the thread can take a moment, and a new watcher may start a
        // new loop meanwhile.
        last?.shutdown(waiting: waiting)
    }

    /// Returns once every loop stopped so far has closed its descriptors and its threads have
    /// been joined. A loop stopped from its own thread (the last watcher invalidated in a
    /// callback delivered there), or by an async sequence's end, is joined by a Dispatch worker
    /// rather than by the thread that stopped it; tests that count descriptors afterwards wait
    /// here.
    static func waitUntilStopped() {
        let loops = state.lock.withLock { state.stopped }
        for loop in loops { loop.waitUntilExited() }
        state.lock.withLock { state.stopped.removeAll { $0.hasExited } }
    }
}

/// A watcher's hold on its loop, released once.
final class LoopLease: Sendable {
    let loop: EventLoop
    private let isShared: Bool
    private let released = Atomic<Bool>(false)
    private let done = Latch()

    init(shared loop: EventLoop) {
        self.loop = loop
        self.isShared = true
    }

    /// A loop the caller owns and shuts down itself.
    init(dedicated loop: EventLoop) {
        self.loop = loop
        self.isShared = false
    }

    /// Lets go of the loop, once; `waiting` false leaves the joining of a stopped loop's threads
    /// to a Dispatch worker.
    func release(waiting: Bool = true) {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if isShared { SharedEventLoop.release(waiting: waiting) }
        done.open()
    }

    /// Returns once ``release()`` has returned on the thread that released. Never call it on one
    /// of the loop's threads: the release may be joining it.
    func waitUntilReleased() {
        done.wait()
    }
}
