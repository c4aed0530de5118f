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
        /// The loop most recently stopped, for ``waitUntilStopped()``.
        var stopped: EventLoop?
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

    static func release() {
        let last = state.lock.withLock { () -> EventLoop? in
            state.users -= 1
            guard state.users == 0 else { return nil }
            defer { state.loop = nil }
            state.stopped = state.loop
            return state.loop
        }
        // Outside the lock: joining the thread can take a moment, and a new watcher may start a
        // new loop meanwhile.
        last?.shutdown()
    }

    /// Returns once the most recently stopped loop has closed its descriptors. A loop stopped
    /// from its own thread (the last watcher invalidated in a callback delivered there) is
    /// detached rather than joined; tests that count descriptors afterwards wait here.
    static func waitUntilStopped() {
        state.lock.withLock { state.stopped }?.waitUntilExited()
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

    func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if isShared { SharedEventLoop.release() }
        done.open()
    }

    /// Returns once ``release()`` has returned on the thread that released. Never call it on one
    /// of the loop's threads: the release may be joining it.
    func waitUntilReleased() {
        done.wait()
    }
}
