import Dispatch

/// A saved state on its way to a start: decoded on a Dispatch worker while the watch is set up
/// and the directory listed, and taken by the loop when the comparison needs it. A state of
/// 100,000 entries takes milliseconds to decode; the listing it is compared with takes a hundred,
/// so on a machine with a second core the decoding costs the start nothing.
final class StateLoad: @unchecked Sendable {
    enum Outcome {
        /// What the watcher had been told when the state was saved.
        case state(SavedDirectories)
        /// The state could not be used and the caller chose to start fresh: everything is new,
        /// after `notice`.
        case fresh(notice: DirectoryChange)
        /// The state could not be used: the start fails with `error`, and reports nothing.
        case refused(DirectoryWatcherError)
    }

    private let lock = Lock()
    /// Under `lock`: the outcome until it is taken.
    private var outcome: Outcome?
    private var isDone = false
    private var isTakenStorage = false
    private var refusalStorage: DirectoryWatcherError?

    /// An outcome known at once.
    init(_ outcome: Outcome) {
        finish(outcome)
    }

    /// Under `lock`: how many times the loop asked for the outcome before it was ready.
    private var asked = 0
    /// Under `lock`: the loop waits for the outcome, which must then come.
    private var released = false

    /// An outcome `decode` gives on a worker. For tests, `waitingForAsks`: the decoding starts
    /// only once the loop has asked that many times and found nothing, so that a listing reads
    /// entries before the state is there.
    init(waitingForAsks asks: Int = 0, decoding decode: @escaping @Sendable () -> Outcome) {
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            if asks > 0 { lock.withLock { while asked < asks && !released { lock.wait() } } }
            finish(decode())
        }
    }

    private func finish(_ result: Outcome) {
        lock.withLock {
            outcome = result
            if case .refused(let error) = result { refusalStorage = error }
            isDone = true
            lock.broadcast()
        }
    }

    /// Whether the loop has taken the outcome.
    var isTaken: Bool { lock.withLock { isTakenStorage } }

    /// The outcome, once it is ready (nil before); only the first call that finds it gets it.
    func takeIfReady() -> Outcome? {
        lock.withLock { () -> Outcome? in
            guard isDone else {
                asked += 1
                lock.broadcast()
                return nil
            }
            guard !isTakenStorage else { return nil }
            return takeLocked()
        }
    }

    /// The outcome, waiting for it; nil when it has been taken already.
    func take() -> Outcome? {
        lock.withLock { () -> Outcome? in
            released = true
            lock.broadcast()
            while !isDone { lock.wait() }
            guard !isTakenStorage else { return nil }
            return takeLocked()
        }
    }

    private func takeLocked() -> Outcome? {
        isTakenStorage = true
        // Let go of the state: the table taken from it is then the only reference, and is
        // updated in place.
        defer { outcome = nil }
        return outcome
    }

    /// Why the start is refused, waiting for the decoding to end; nil when it is not.
    func refusal() -> DirectoryWatcherError? {
        lock.withLock {
            released = true
            lock.broadcast()
            while !isDone { lock.wait() }
            return refusalStorage
        }
    }

    /// Why the start is refused, if the decoding has ended and refused it.
    var refusalIfDone: DirectoryWatcherError? { lock.withLock { refusalStorage } }
}
