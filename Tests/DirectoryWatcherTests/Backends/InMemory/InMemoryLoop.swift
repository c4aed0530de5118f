import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher
@testable import DirectoryWatcherTesting

/// The in-memory backend: the router over a ``MemoryFileSystem``, driven as the event loop drives
/// it, but by the test, on the test's thread, with a hand clock. Each ``run()`` is the loop's
/// wake-ups until the queue is empty: the events read, the deadlines due, the end of the wake-up,
/// then the mailboxes drained, so what the watchers were handed is there to assert at once.
final class InMemoryLoop {
    let files = MemoryFileSystem()
    private(set) var router: Router!
    /// The loop's clock, in nanoseconds: moved by the test (``advance(by:)``) and nothing else.
    var now: UInt64 = 0
    /// How long a rename's first half waits for its second.
    let pairingWindow: UInt64 = 1_000_000
    /// The events one read takes at most (the loop reads a buffer's worth).
    var eventsPerRead = Int.max

    init() {
        let system = files.system
        let files = self.files
        router = Router(
            table: WatchTable(backend: files, system: system), pairingWindow: pairingWindow,
            barrierWD: MemoryFileSystem.barrierWD,
            writeBarrierFile: { () throws(SyscallError) in files.touchBarrier() },
            listDirectory: { path throws(SyscallError) in try Snapshot.read(path, system: system) },
            listNames: { path, visit throws(SyscallError) in try Snapshot.readNames(path, system: system, visit) },
            wallClock: { files.readClock() }, birthClock: { files.readClock() }, clock: { [unowned self] in now },
            isUnchanged: { path, old throws(SyscallError) in try Snapshot.isUnchanged(path, since: old, system: system)
            })
    }

    /// Watches `root` as a watcher with these options would, and records what it is handed.
    func watch(
        _ root: String, options: DirectoryWatcher.Options = DirectoryWatcher.Options(), limit: Int? = nil,
        acknowledgesLater: Bool = false
    ) throws -> (Subscription, ChangeRecorder) {
        let settler = options.settling.map {
            Settler(
                quietPeriod: $0.quietPeriod.nanoseconds, maximumWait: $0.maximumWait.nanoseconds,
                reportedMask: options.events.eventMask, listsRemovedContents: $0.listsRemovedContents)
        }
        let subscription = Subscription(
            root: FileSystemPath(root), mask: options.events.eventMask, target: .mailbox(Mailbox(mayBlock: true)),
            keepsSnapshot: options.recovery == .exact, recursive: options.recursive,
            exclusions: Exclusions(options.excludes), settler: settler, limit: limit ?? Subscription.backlogLimit,
            strictLimit: limit != nil, acknowledgesLater: acknowledgesLater)
        let recorder = ChangeRecorder()
        subscription.receiver = recorder
        if let failure = router.subscribe(subscription) { throw failure }
        deliver()
        return (subscription, recorder)
    }

    /// The loop's wake-ups until the queue is empty and nothing is due now.
    func run() {
        repeat {
            let events = files.read(upTo: eventsPerRead)
            for event in events { router.receive(event, now: now) }
            router.expire(now: now)
            router.finishWakeUp(queueDrained: files.queued == 0)
            deliver()
        } while files.queued > 0
    }

    /// Moves the clock on by `nanoseconds` and runs the wake-up of the deadline.
    func advance(by nanoseconds: UInt64) {
        now += nanoseconds
        run()
    }

    /// Runs every wake-up until nothing is queued or due: each deadline is reached by moving the
    /// clock to it, as the loop sleeps to it.
    func runUntilIdle(file: StaticString = #filePath, line: UInt = #line) {
        run()
        for _ in 0..<1_000 {
            guard let deadline = router.deadline else { return }
            now = max(now, deadline)
            run()
        }
        XCTFail("still not idle after 1,000 deadlines", file: file, line: line)
    }

    /// A barrier for `subscription`: true once it completed.
    func barrier(_ subscription: Subscription) -> LockedValue<Bool> {
        let done = LockedValue(false)
        router.requestBarrier(for: subscription) { done.update { $0 = true } }
        deliver()
        return done
    }

    /// Drains what the router scheduled, as the loop's leader does after each wake-up.
    func deliver() {
        for mailbox in router.takeReady() { mailbox.drain() }
    }
}

/// Records what a subscription hands over, as a watcher would receive it.
final class ChangeRecorder: ChangeReceiver, @unchecked Sendable {
    private let lock = NSLock()
    private var received: [[DirectoryChange]] = []
    private var gone = 0
    var onBatch: (@Sendable () -> Void)?

    var batches: [[DirectoryChange]] { lock.withLock { received } }
    var changes: [DirectoryChange] { batches.flatMap { $0 } }
    var rootsGone: Int { lock.withLock { gone } }

    func receive(_ changes: [DirectoryChange], through gate: DeliveryGate) {
        // A copy of the changes, not the array: a consumer that keeps nothing of the batch.
        lock.withLock { received.append(keepsArrays ? changes : Array(changes[...])) }
        onBatch?()
    }

    /// Keeps each batch's array as it was given (true), or only a copy of its changes.
    var keepsArrays = true

    func resumed(with changes: [DirectoryChange], through gate: DeliveryGate) {
        lock.withLock { received.append(changes) }
        onBatch?()
    }

    func rootWentAway(_ subscription: Subscription) {
        lock.withLock { gone += 1 }
    }
}
