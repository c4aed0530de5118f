import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher
@testable import DirectoryWatcherTesting

/// The pipeline through the in-memory backend, with no kernel and no thread: overflow recovery,
/// backlog catch-up, pause and resume, settling and barriers, each checked against what the
/// file system holds at the end.
final class InMemoryPipelineTests: XCTestCase {
    private var loop: InMemoryLoop!

    override func setUp() {
        loop = InMemoryLoop()
        loop.files.mkdirs("/d")
    }

    override func tearDown() {
        XCTAssertEqual(loop.files.openDescriptors, 0, "every directory opened is closed")
        loop = nil
    }

    private func found(_ kind: DirectoryChange.Kind, _ path: String, from old: String? = nil) -> DirectoryChange {
        var change = DirectoryChange(kind, path, from: old)
        change.foundByRescan = true
        return change
    }

    /// The changes of a batch, the notices left out, in an order that does not depend on the
    /// listing's.
    private func sorted(_ changes: [DirectoryChange]) -> [String] {
        changes.filter { $0.kind != .overflow }.map { "\($0.kind) \($0.path)" }.sorted()
    }

    // MARK: - Overflow recovery

    func testAnOverflowIsFollowedByAnExactRescan() throws {
        loop.files.create("/d/kept")
        loop.files.create("/d/removed")
        loop.files.create("/d/renamed")
        let (subscription, recorder) = try loop.watch("/d")
        loop.files.queueCapacity = 3
        for index in 0..<10 { loop.files.create("/d/new\(index)") }
        loop.files.remove("/d/removed")
        loop.files.rename("/d/renamed", to: "/d/now")
        loop.files.write("/d/kept")
        loop.runUntilIdle()
        XCTAssertFalse(subscription.loop.isEnded)
        let notices = recorder.changes.filter { $0.kind == .overflow }
        XCTAssertEqual(notices.map(\.path), ["/d"], "one notice")
        // Three events were read before the overflow, the rest found by the rescan, each once.
        let reported = Set(recorder.changes.map { "\($0.kind) \($0.path)" })
        for index in 0..<10 { XCTAssertTrue(reported.contains("created /d/new\(index)"), "\(recorder.changes)") }
        XCTAssertTrue(recorder.changes.contains(found(.removed, "/d/removed")), "\(recorder.changes)")
        XCTAssertTrue(recorder.changes.contains(found(.renamed, "/d/now", from: "/d/renamed")), "\(recorder.changes)")
        XCTAssertTrue(recorder.changes.contains(found(.modified, "/d/kept")), "\(recorder.changes)")
        XCTAssertEqual(recorder.changes.count, reported.count, "nothing twice: \(recorder.changes)")
    }

    func testARescanThatFindsTheDirectoryGoneEndsTheWatch() throws {
        let (subscription, recorder) = try loop.watch("/d")
        loop.files.queueCapacity = 1
        loop.files.create("/d/a")
        loop.files.create("/d/b")
        loop.files.remove("/d")
        loop.runUntilIdle()
        XCTAssertTrue(subscription.loop.isEnded)
        XCTAssertEqual(recorder.rootsGone, 1)
        XCTAssertEqual(recorder.changes.last?.kind, .rootRemoved)
    }

    // MARK: - Backlog catch-up

    /// A consumer with room for one change (an async sequence's buffer) given five: it has the
    /// first, and once it takes that, what it missed comes after one notice (what was kept,
    /// then what a listing found since: here f3's removal).
    func testABacklogThatOverflowsIsCaughtUpByAListing() throws {
        let (subscription, recorder) = try loop.watch("/d", limit: 1, acknowledgesLater: true)
        for index in 0..<5 { loop.files.create("/d/f\(index)") }
        loop.run()
        XCTAssertEqual(recorder.changes, [DirectoryChange(.created, "/d/f0")], "what fits")
        loop.files.remove("/d/f3")
        loop.run()
        XCTAssertEqual(recorder.changes.count, 1, "still behind: nothing more")
        subscription.acknowledge(1)
        loop.router.backlogDrained(subscription)
        loop.runUntilIdle()
        let notice = try XCTUnwrap(recorder.changes.first { $0.kind == .overflow })
        XCTAssertEqual(notice.path, "/d")
        XCTAssertEqual(recorder.batches.count, 2, "what fitted, then the catch-up: \(recorder.batches)")
        // Applied in order, what it was told is what the directory holds.
        var model = TreeModel(root: "/d")
        let problems = model.apply(recorder.changes, queueLost: true)
        XCTAssertNil(model.differences(from: loop.files.tree("/d"), problems), "\(recorder.changes)")
    }

    // MARK: - Pause and resume

    func testChangesWhilePausedComeInOneBatchOnResuming() throws {
        loop.files.create("/d/stays")
        loop.files.create("/d/goes")
        let (subscription, recorder) = try loop.watch("/d")
        loop.router.pause(subscription)
        loop.files.create("/d/made")
        loop.files.remove("/d/goes")
        loop.files.create("/d/brief")
        loop.files.remove("/d/brief")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.batches, [], "nothing while paused")
        loop.router.resume(subscription)
        loop.runUntilIdle()
        XCTAssertEqual(recorder.batches.count, 1)
        XCTAssertEqual(sorted(recorder.changes), ["created /d/made", "removed /d/goes"])
        XCTAssertTrue(recorder.changes.allSatisfy(\.whilePaused), "\(recorder.changes)")
        loop.files.create("/d/after")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.batches.last, [DirectoryChange(.created, "/d/after")], "as they come again")
    }

    /// The batch that ends a pause is undelivered until its callback has run, as any batch is:
    /// a save waits for it (a state taken before would hold what the watcher was not yet told,
    /// and a crash then would lose it: a start from a saved state is such a pause), and a
    /// consumer that acknowledges what it takes (an async sequence) brings the count back to
    /// none, not below.
    func testASaveWaitsForTheResumingBatch() throws {
        for acknowledgesLater in [false, true] {
            loop = InMemoryLoop()
            loop.files.mkdirs("/d")
            loop.files.create("/d/goes")
            let (subscription, recorder) = try loop.watch("/d", acknowledgesLater: acknowledgesLater)
            loop.router.pause(subscription)
            loop.files.remove("/d/goes")
            loop.files.create("/d/made")
            loop.runUntilIdle()
            loop.router.resume(subscription)
            // The wake-up that lists and hands the batch over, before its mailbox is drained.
            loop.router.finishWakeUp(queueDrained: true)
            let taken = LockedValue(false)
            loop.router.requestSave(of: subscription) { _ in taken.update { $0 = true } }
            XCTAssertFalse(taken.get(), "a save waits while the resuming batch is undelivered")
            XCTAssertEqual(recorder.batches, [])
            loop.deliver()
            XCTAssertEqual(sorted(recorder.changes), ["created /d/made", "removed /d/goes"])
            if acknowledgesLater {
                loop.router.takeDueSaves()
                XCTAssertFalse(taken.get(), "nor while the consumer has not taken it")
                subscription.acknowledge(2)
            }
            XCTAssertEqual(subscription.undelivered, 0)
            loop.router.takeDueSaves()
            XCTAssertTrue(taken.get(), "taken once the batch is delivered")
        }
    }

    /// A batch's storage, once delivered, holds the watcher's next batch (no array allocated a
    /// batch, none grown change by change), and a batch a consumer kept is never changed by it.
    func testABatchsStorageHoldsTheNextAndAKeptBatchStaysAsItWas() throws {
        for keepsArrays in [false, true] {
            loop = InMemoryLoop()
            loop.files.mkdirs("/d")
            let (subscription, recorder) = try loop.watch("/d")
            recorder.keepsArrays = keepsArrays
            loop.files.create("/d/a")
            loop.files.create("/d/b")
            loop.files.create("/d/c")
            loop.run()
            let first = recorder.batches
            XCTAssertEqual(first, [["/d/a", "/d/b", "/d/c"].map { DirectoryChange(.created, $0) }])
            loop.files.create("/d/d")
            loop.run()
            XCTAssertEqual(recorder.batches, first + [[DirectoryChange(.created, "/d/d")]], "the first batch as it was")
            if !keepsArrays {
                XCTAssertGreaterThanOrEqual(
                    subscription.loop.pending.capacity, 3, "the next batch goes into the first one's storage")
            }
            XCTAssertTrue(subscription.loop.pending.isEmpty)
        }
    }

    func testAResumeWithNothingChangedHandsOverAnEmptyBatchWithoutListing() throws {
        let (subscription, recorder) = try loop.watch("/d")
        loop.router.pause(subscription)
        loop.router.resume(subscription)
        loop.runUntilIdle()
        XCTAssertEqual(recorder.batches, [[]])
    }

    func testAPausedTreeFindsWhatChangedInItsSubdirectories() throws {
        loop.files.mkdirs("/d/a/b")
        let (subscription, recorder) = try loop.watch("/d", options: DirectoryWatcher.Options(recursive: true))
        loop.router.pause(subscription)
        loop.files.create("/d/a/b/f")
        loop.files.mkdir("/d/c")
        loop.runUntilIdle()
        loop.router.resume(subscription)
        loop.runUntilIdle()
        XCTAssertEqual(sorted(recorder.changes), ["created /d/a/b/f", "created /d/c"])
        loop.files.create("/d/c/g")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes.last, DirectoryChange(.created, "/d/c/g"), "the new directory is watched")
    }

    // MARK: - Settling

    private var settled: DirectoryWatcher.Options {
        DirectoryWatcher.Options(settling: DirectoryWatcher.Settling(quietPeriod: .milliseconds(50)))
    }

    func testASettledBatchWaitsForTheWriterToCloseAndTheQuietPeriod() throws {
        let (_, recorder) = try loop.watch("/d", options: settled)
        loop.files.create("/d/f")
        loop.files.beginWriting("/d/f")
        loop.run()
        loop.advance(by: 60_000_000)
        XCTAssertEqual(recorder.batches, [], "the writer is still busy")
        loop.files.endWriting("/d/f")
        loop.run()
        loop.advance(by: 40_000_000)
        XCTAssertEqual(recorder.batches, [], "quiet for less than the quiet period")
        loop.advance(by: 10_000_000)
        XCTAssertEqual(recorder.batches, [[DirectoryChange(.created, "/d/f")]], "one change: made and written")
    }

    func testASettledBatchGoesAtTheMaximumWaitWhateverTheWriterDoes() throws {
        let options = DirectoryWatcher.Options(
            settling: DirectoryWatcher.Settling(quietPeriod: .milliseconds(50), maximumWait: .milliseconds(200)))
        let (_, recorder) = try loop.watch("/d", options: options)
        loop.files.create("/d/log")
        loop.files.beginWriting("/d/log")
        loop.run()
        for _ in 0..<3 {
            loop.advance(by: 60_000_000)
            loop.files.beginWriting("/d/log")
            loop.run()
        }
        XCTAssertEqual(recorder.batches, [])
        loop.advance(by: 20_000_000)
        XCTAssertEqual(recorder.batches.count, 1, "due 200 ms after the first change")
    }

    /// A settling consumer that falls behind (a buffer of one): the changes that did not fit are
    /// settled already, and a write to one of them while it was behind came after what it knew.
    /// The catch-up tells each file once, as made, in the order made, never that one was
    /// removed; the write is found by the listing, and settles.
    func testASettledBacklogsCatchUpTellsWhatDidNotFitAsItWas() throws {
        let (subscription, recorder) = try loop.watch("/d", options: settled, limit: 1, acknowledgesLater: true)
        for index in 0..<3 { loop.files.create("/d/f\(index)") }
        loop.run()
        loop.advance(by: 50_000_000)
        XCTAssertEqual(recorder.batches, [[DirectoryChange(.created, "/d/f0")]], "what fits")
        // Written while the consumer is behind: still settling when the catch-up is due.
        loop.files.write("/d/f2")
        loop.run()
        subscription.acknowledge(1)
        loop.router.backlogDrained(subscription)
        loop.run()
        XCTAssertEqual(
            recorder.batches.last?.filter { $0.kind != .overflow },
            [DirectoryChange(.created, "/d/f1"), DirectoryChange(.created, "/d/f2")], "what did not fit, as it was")
        subscription.acknowledge(3)
        loop.runUntilIdle()
        XCTAssertEqual(recorder.batches.count, 3, "\(recorder.batches)")
        XCTAssertEqual(recorder.batches.last, [found(.modified, "/d/f2")], "what the listing found, settled")
        var model = TreeModel(root: "/d")
        let problems = model.apply(recorder.changes, queueLost: true)
        XCTAssertNil(model.differences(from: loop.files.tree("/d"), problems), "\(recorder.changes)")
    }

    /// The same consumer (with room for two) when the kernel's queue overflows too, in the
    /// wake-up its batch is due: the listing's findings settle after the batch went, and the
    /// batch overflows the backlog. The watcher is taken to know what the listing found from
    /// then on (the catch-up's own listing compares with it), so those changes come with the
    /// catch-up, after what did not fit.
    func testChangesSettlingWhenTheBacklogOverflowsComeWithTheCatchUp() throws {
        try overflowWhileSettling(asksForABarrier: false)
    }

    /// The same, with a barrier asked for before any of it: it completes after every change.
    func testABarrierWaitingForASettledBatchThatOverflowsCompletesAfterTheCatchUp() throws {
        try overflowWhileSettling(asksForABarrier: true)
    }

    private func overflowWhileSettling(asksForABarrier: Bool, file: StaticString = #filePath, line: UInt = #line)
        throws
    {
        let options = DirectoryWatcher.Options(
            settling: DirectoryWatcher.Settling(quietPeriod: .milliseconds(50), maximumWait: .milliseconds(60)))
        let (subscription, recorder) = try loop.watch("/d", options: options, limit: 2, acknowledgesLater: true)
        for index in 0..<3 { loop.files.create("/d/f\(index)") }
        loop.run()
        let done = asksForABarrier ? loop.barrier(subscription) : LockedValue(true)
        loop.advance(by: 10_000_000)
        XCTAssertEqual(done.get(), !asksForABarrier, "it waits for the changes settling", file: file, line: line)
        loop.files.queueCapacity = 2
        for index in 0..<3 { loop.files.create("/d/g\(index)") }
        loop.files.queueCapacity = 16_384
        loop.advance(by: 50_000_000)
        XCTAssertEqual(
            recorder.changes.map { "\($0.kind) \($0.path)" }, ["overflow /d", "created /d/f0"],
            "what fits: the kernel's notice, then the first change", file: file, line: line)
        XCTAssertEqual(done.get(), !asksForABarrier, "it waits for the catch-up", file: file, line: line)
        subscription.acknowledge(2)
        loop.router.backlogDrained(subscription)
        loop.run()
        // Taken as a consumer takes them.
        subscription.acknowledge(recorder.batches.last?.count ?? 0)
        loop.runUntilIdle()
        XCTAssertTrue(done.get(), file: file, line: line)
        let made = recorder.changes.filter { $0.kind == .created }.map(\.path.description)
        XCTAssertEqual(
            made, ["/d/f0", "/d/f1", "/d/f2", "/d/g0", "/d/g1", "/d/g2"], "\(recorder.batches)", file: file, line: line)
        XCTAssertEqual(
            recorder.changes.count, made.count + 2, "two notices, each file once: \(recorder.batches)", file: file,
            line: line)
    }

    // MARK: - Barriers

    func testABarrierCompletesAfterTheChangesMadeBeforeIt() throws {
        let (subscription, recorder) = try loop.watch("/d")
        loop.files.create("/d/a")
        let done = loop.barrier(subscription)
        XCTAssertFalse(done.get(), "its event is queued after a's")
        loop.run()
        XCTAssertTrue(done.get())
        XCTAssertEqual(recorder.changes, [DirectoryChange(.created, "/d/a")])
    }

    func testABarrierDuringAnOverflowWaitsForTheRescan() throws {
        let (subscription, recorder) = try loop.watch("/d")
        loop.files.queueCapacity = 2
        for index in 0..<6 { loop.files.create("/d/f\(index)") }
        let done = loop.barrier(subscription)
        loop.files.queueCapacity = 16_384
        loop.runUntilIdle()
        XCTAssertTrue(done.get())
        XCTAssertEqual(sorted(recorder.changes), (0..<6).map { "created /d/f\($0)" })
    }

    func testABarrierOfAPausedWatcherCompletes() throws {
        let (subscription, _) = try loop.watch("/d")
        loop.router.pause(subscription)
        let done = loop.barrier(subscription)
        loop.runUntilIdle()
        XCTAssertTrue(done.get())
    }
}
