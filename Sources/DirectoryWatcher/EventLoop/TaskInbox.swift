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

    // Any thread, under `lock`. (A pthread mutex rather than `Synchronization.Mutex`, whose
    // futex calls ThreadSanitizer cannot see.)
    private let lock = Lock()
    private var tasks: [Task] = []
    private var life = Life.open
    /// The leader has closed everything.
    private var exited = false

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
        lock.withLock {
            exited = true
            lock.broadcast()
        }
    }

    func waitUntilExited() {
        lock.withLock {
            while !exited { lock.wait() }
        }
    }

    /// A loop that failed to start.
    func closeUnstarted() {
        lock.withLock {
            life = .closed
            exited = true
        }
    }
}
