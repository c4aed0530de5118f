@_spi(DirectoryWatcherTesting) import DirectoryWatcher
import Dispatch

/// What a watcher delivered to its delegate from the moment the log was made, batch by batch, as
/// the delegate received it: the record a test asserts on.
///
/// ```swift
/// let log = ChangeLog(watching: watcher)
/// try folder.write("a.txt", "hello")
/// let seen = await log.wait(until: { $0.contains { $0.kind == .modified } })
/// ```
///
/// The log sees what the delegate sees, just before the delegate sees it, on the same thread, so
/// once `DirectoryWatcher/barrier()` has returned, every change before it is in the log and the
/// delegate has been called with it. Safe from any thread.
public final class ChangeLog: Sendable {
    private struct State {
        var batches: [[DirectoryChange]] = []
        var waiters: [Waiter] = []
        var nextWaiter = 0
    }

    private struct Waiter {
        let number: Int
        let condition: @Sendable ([DirectoryChange]) -> Bool
        let resume: @Sendable (Bool) -> Void
    }

    /// The watcher whose deliveries are logged.
    public let watcher: DirectoryWatcher
    private let state = Locked(State())
    private let observer = Locked<Int?>(nil)

    /// Starts logging what `watcher` delivers from now on.
    public init(watching watcher: DirectoryWatcher) {
        self.watcher = watcher
        let number = watcher.observeDeliveries { [weak self] batch in self?.append(batch) }
        observer.withLock { $0 = number }
    }

    deinit {
        if let number = observer.withLock({ $0 }) { watcher.removeDeliveryObserver(number) }
    }

    /// Every change logged so far, oldest first.
    public var changes: [DirectoryChange] { state.withLock { $0.batches.flatMap { $0 } } }

    /// The batches logged so far, as the delegate received them.
    public var batches: [[DirectoryChange]] { state.withLock { $0.batches } }

    /// Forgets what was logged so far.
    public func clear() { state.withLock { $0.batches = [] } }

    /// Returns once every change made before this call has been delivered (the watcher's
    /// `DirectoryWatcher/barrier()`), with every change logged.
    @discardableResult
    public func settle() async -> [DirectoryChange] {
        await watcher.barrier()
        return changes
    }

    /// Returns the changes logged once `condition` holds of them (at once if it holds already).
    /// After `timeout` with the condition still false, fails the test with what was seen and
    /// returns it. The timeout only bounds a test that would otherwise hang: a passing test waits
    /// exactly until the change it waits for is delivered.
    @discardableResult
    public func wait(
        timeout: Duration = .seconds(10), until condition: @escaping @Sendable ([DirectoryChange]) -> Bool,
        fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
    ) async -> [DirectoryChange] {
        let met = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let once = Locked(Optional(continuation))
            let resume: @Sendable (Bool) -> Void = { met in once.withLock { $0.take() }?.resume(returning: met) }
            let number = state.withLock { state -> Int? in
                if condition(state.batches.flatMap { $0 }) { return nil }
                state.nextWaiter += 1
                state.waiters.append(Waiter(number: state.nextWaiter, condition: condition, resume: resume))
                return state.nextWaiter
            }
            guard let number else { return resume(true) }
            let (seconds, attoseconds) = timeout.components
            let deadline =
                DispatchTime.now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
            DispatchQueue.global().asyncAfter(deadline: deadline) { [weak self] in
                self?.state.withLock { $0.waiters.removeAll { $0.number == number } }
                resume(false)
            }
        }
        let seen = changes
        if !met {
            CallSite(fileID: fileID, filePath: filePath, line: line, column: column).fail(
                "no change that was waited for came within \(timeout); what \(watcher.path) delivered:\n"
                    + (seen.isEmpty ? "  (nothing)" : seen.map { "  \($0)" }.joined(separator: "\n")))
        }
        return seen
    }

    private func append(_ batch: [DirectoryChange]) {
        let ready = state.withLock { state -> [Waiter] in
            state.batches.append(batch)
            let all = state.batches.flatMap { $0 }
            let ready = state.waiters.filter { $0.condition(all) }
            state.waiters.removeAll { waiter in ready.contains { $0.number == waiter.number } }
            return ready
        }
        for waiter in ready { waiter.resume(true) }
    }
}

extension DirectoryWatcher {
    /// The changes this watcher delivered while `body` ran: what it had delivered before is
    /// waited for and left out (a barrier), then `body` runs, then everything it changed is waited
    /// for (a barrier) and returned, as the delegate received it.
    ///
    /// ```swift
    /// let changes = try await watcher.changes { try folder.createFile("a.txt") }
    /// assertChanges(changes, [.created("a.txt")], under: watcher)
    /// ```
    ///
    /// A settled watcher (``Options/settling``) hands its batch over once its quiet period has
    /// passed, which a barrier does not wait for: use ``ChangeLog/wait(timeout:until:fileID:filePath:line:column:)`` there.
    public func changes(during body: () async throws -> Void) async rethrows -> [DirectoryChange] {
        await barrier()
        let log = ChangeLog(watching: self)
        try await body()
        return await log.settle()
    }
}
