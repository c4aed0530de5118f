import Dispatch

/// The way into a loop from other threads: tasks, the eventfd that wakes the leader for them, and
/// the loop's life.
///
/// Lifetime (Architecture.md, "Lifetimes"): every write to the eventfd is made under the lock
/// while the loop is not closed, and the leader moves the loop to closed under the same lock
/// before it closes the descriptors, so no thread can write into a descriptor number the loop has
/// closed and the app may since have been given for a file.
final class TaskInbox: @unchecked Sendable {
    typealias Task = @Sendable (EventLoop) -> Void

    /// `.open` takes tasks; `.stopping` takes none and the stop task is queued; `.closed`, the
    /// leader is closing the descriptors.
    private enum Life { case open, stopping, closed }

    let wakeFD: Int32
    private let system: System

    // Any thread, under `lock` (``Lock``, whose hand-overs ThreadSanitizer sees, unlike
    // `Synchronization.Mutex`'s). The runtime's exclusivity checks would only cost time: the
    // optimizer hoists the one for `tasks` out of the loop over a wake-up's descriptors, so every
    // wake-up paid it, tasks or not.
    private let lock = Lock()
    @exclusivity(unchecked) private var tasks: [Task] = []
    @exclusivity(unchecked) private var life = Life.open
    /// Opens once the leader has closed everything.
    private let exited = Latch()

    init(wakeFD: Int32, system: System) {
        self.wakeFD = wakeFD
        self.system = system
    }

    var isClosed: Bool { lock.withLock { life == .closed } }
    var isOpen: Bool { lock.withLock { life == .open } }

    /// Queues `task`; false when the loop is stopping (the task never runs).
    func execute(_ task: @escaping Task) -> Bool {
        lock.withLock {
            guard life == .open else { return false }
            append(task)
            return true
        }
    }

    /// Queues the stop task; false when the loop was stopped already.
    func stop(_ task: @escaping Task) -> Bool {
        lock.withLock {
            guard life == .open else { return false }
            life = .stopping
            append(task)
            return true
        }
    }

    /// Only the first task since the leader last emptied the inbox needs to wake it. Under
    /// `lock`, while the descriptor is still ours.
    private func append(_ task: @escaping Task) {
        tasks.append(task)
        guard tasks.count == 1 else { return }
        precondition(life != .closed, "the loop's eventfd was signalled after it was closed")
        try? system.signal(eventFD: wakeFD)
    }

    /// Leader: every task queued so far.
    func take() -> [Task] {
        try? system.drain(eventFD: wakeFD)
        return lock.withLock {
            defer { tasks = [] }
            return tasks
        }
    }

    /// Leader, before it closes the descriptors.
    func close() {
        lock.withLock {
            precondition(life == .stopping, "the loop ended without being stopped")
            life = .closed
        }
    }

    /// Leader, once the descriptors are closed.
    func markExited() {
        exited.open()
    }

    func waitUntilExited() {
        exited.wait()
    }

    /// Whether the leader has closed the descriptors (a look that never waits).
    var hasExited: Bool { exited.isOpened }

    /// A loop that failed to start.
    func closeUnstarted() {
        lock.withLock { life = .closed }
        exited.open()
    }
}

/// The loop's interface to other threads, through its inbox.
extension EventLoop {
    /// Runs `task` on the leader. False when the loop is shutting down (the task never runs).
    @discardableResult
    func execute(_ task: @escaping TaskInbox.Task) -> Bool {
        inbox.execute(task)
    }

    /// Runs `body` on the leader and returns its result; nil when the loop is shutting down. On
    /// the leader itself (inside a callback), runs it at once.
    func submitAndWait<Result: Sendable>(_ body: @escaping @Sendable (EventLoop) -> Result) -> Result? {
        let (leads, inCallback) = leadership.pause()
        if leads {
            defer { resumeCallback(inCallback) }
            return body(self)
        }
        let box = ResultBox<Result>()
        let done = DispatchSemaphore(value: 0)
        guard
            execute({ loop in
                box.value = body(loop)
                done.signal()  // the semaphore orders the write before the read below
            })
        else { return nil }
        done.wait()
        return box.value
    }

    /// Stops the loop, whose leader closes the descriptors. Returns once its threads have exited,
    /// except on one of them (the last watcher invalidated inside a callback), which cannot wait
    /// for itself, or when not `waiting` (an async sequence's end, which must not wait for the
    /// wake-up in progress): a Dispatch worker joins them instead. Later calls return at once.
    public func shutdown(waiting: Bool = true) {
        guard inbox.stop({ loop in loop.running = false }) else { return }
        if threads.isMember || !waiting {
            DispatchQueue.global().async { [self] in
                inbox.waitUntilExited()
                threads.joinAll()
            }
        } else {
            inbox.waitUntilExited()
            threads.joinAll()
        }
    }

    /// When the loop is stopping, returns once it has stopped (``waitUntilExited()``); at once
    /// while it runs.
    func waitIfStopping() {
        if !inbox.isOpen { waitUntilExited() }
    }

    /// Returns once the descriptors are closed and the threads joined, however the loop was
    /// stopped (tests: a loop stopped from its own thread is joined by a Dispatch worker).
    func waitUntilExited() {
        inbox.waitUntilExited()
        threads.waitUntilJoined()
    }

    /// Whether ``waitUntilExited()`` would return at once.
    var hasExited: Bool { inbox.hasExited && threads.isJoined }
}

/// Carries a task's result back to the thread waiting for it.
private final class ResultBox<Value>: @unchecked Sendable {
    var value: Value?
}
