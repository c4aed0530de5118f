import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The default delivery: callbacks on the thread that read the change, and a standby that takes
/// over the reading when a callback blocks.
class StandbyTests: WatchedDirectoryTestCase {
    /// Hundreds of changes and a backlog of 64 here; 20,000 changes, a thousand delegates and the
    /// real backlog limit (16,384) in the stress suite.
    var scale: Scale { .fast }
    var backlogLimit: Int { scale == .stress ? Subscription.backlogLimit : 64 }

    /// Waits, failing instead of hanging, until at most `limit` loop threads run.
    private func waitForLoopThreads(atMost limit: Int, file: StaticString = #filePath, line: UInt = #line) {
        let done = expectation(description: "at most \(limit) loop threads")
        DispatchQueue.global().async {
            LoopThreads.running.waitUntil(atMost: limit)
            done.fulfill()
        }
        wait(for: [done], timeout: 30)
    }

    func testABlockedCallbackDoesNotStopTheChangesElsewhere() throws {
        let count = scale == .stress ? 20_000 : 2_000
        let release = DispatchSemaphore(value: 0)
        let blockedStarted = expectation(description: "the blocked delegate is inside its callback")
        let blocked = Recorder()
        blocked.onFirstBatch { _, _ in
            blockedStarted.fulfill()
            release.wait()
        }
        let blockedWatcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: blocked)
        defer { blockedWatcher.invalidate() }
        let other = TemporaryDirectory()
        let received = Recorder()
        let otherWatcher = try DirectoryWatcher.watchFolder(path: other.path, delegate: received)
        defer { otherWatcher.invalidate() }
        let threadsBefore = ProcessResources.loopThreads()

        let first = directory.touch("first")
        wait(for: [blockedStarted], timeout: 10)
        var expectedBlocked = [DirectoryChange(.created, first)]
        for index in 0..<100 { expectedBlocked.append(DirectoryChange(.created, directory.touch("queued\(index)"))) }
        // As fast as this thread can; every 500 a barrier shows the queue is being read while the
        // delegate is blocked (were it not, the barrier would never complete).
        var expectedOther: [DirectoryChange] = []
        for index in 0..<count {
            expectedOther.append(DirectoryChange(.created, other.touch("f\(index)")))
            if index % 500 == 499 { waitForDelivery(otherWatcher) }
        }
        waitForDelivery(otherWatcher)
        XCTAssertEqual(received.changes.count, count)
        XCTAssertEqual(received.changes, expectedOther, "every change, in order, and no overflow")
        XCTAssertLessThanOrEqual(
            ProcessResources.loopThreads(), max(threadsBefore, 2) + 1, "one thread more for the blocked callback")

        release.signal()
        waitForDelivery(blockedWatcher)
        XCTAssertEqual(blocked.changes, expectedBlocked, "the blocked watcher's changes follow, in order")
        // The thread that was blocked finishes or stands by; the loop is back to two.
        waitForLoopThreads(atMost: 2)
    }

    func testTwoBlockedCallbacksEachHoldAThreadOnlyWhileTheyBlock() throws {
        let release = DispatchSemaphore(value: 0)
        var watchers: [DirectoryWatcher] = []
        var recorders: [Recorder] = []
        var directories: [TemporaryDirectory] = []
        defer { for watcher in watchers { watcher.invalidate() } }
        for index in 0..<2 {
            let started = expectation(description: "blocked \(index)")
            let recorder = Recorder()
            recorder.onFirstBatch { _, _ in
                started.fulfill()
                release.wait()
            }
            let blockedDirectory = TemporaryDirectory()
            watchers.append(try DirectoryWatcher.watchFolder(path: blockedDirectory.path, delegate: recorder))
            recorders.append(recorder)
            directories.append(blockedDirectory)
            // The second blocks only once the standby has taken over from the first.
            blockedDirectory.touch("block")
            wait(for: [started], timeout: 10)
        }
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
        let file = directory.touch("still-delivered")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes, [DirectoryChange(.created, file)])
        XCTAssertLessThanOrEqual(ProcessResources.loopThreads(), 4, "two blocked, one leading, one standing by")
        release.signal()
        release.signal()
        for (watcher, recorder) in zip(watchers, recorders) {
            waitForDelivery(watcher)
            XCTAssertEqual(recorder.changes.count, 1)
        }
        waitForLoopThreads(atMost: 2)
    }

    /// The last watcher invalidated from outside while another watcher's callback (that watcher
    /// already invalidated) blocks until that invalidate() returns: stopping the loop must not
    /// wait for the blocked callback.
    func testStoppingTheLoopDoesNotWaitForABlockedCallback() throws {
        let mayReturn = DispatchSemaphore(value: 0)
        let started = expectation(description: "blocked callback started")
        let blocked = Recorder()
        blocked.onFirstBatch { watcher, _ in
            watcher.invalidate()
            started.fulfill()
            mayReturn.wait()
        }
        let a = try DirectoryWatcher.watchFolder(path: directory.path, delegate: blocked)
        let other = TemporaryDirectory()
        let b = try DirectoryWatcher.watchFolder(path: other.path, delegate: Recorder())
        directory.touch("block")
        wait(for: [started], timeout: 10)
        let stopped = expectation(description: "the last invalidate() returned")
        DispatchQueue.global().async {
            b.invalidate()
            stopped.fulfill()
        }
        wait(for: [stopped], timeout: 10)
        XCTAssertFalse(a.isValid)
        mayReturn.signal()
        waitForLoopThreads(atMost: 0)
    }

    /// A thousand in the stress suite. Two threads serve every watcher, plus one for each callback
    /// the loop stopped waiting for (it ran past a tick): on a quiet machine none or a few, but on
    /// a busy one a 2 ms callback the scheduler set aside for 20 ms is, to the loop, a blocked
    /// callback, and gets its thread. So the test counts, inside every callback, the running loop
    /// threads against the deposed ones at that moment, rather than against a number that only
    /// holds while the machine is quiet (4, which a loaded run under ThreadSanitizer exceeded).
    func testManySlowDelegatesShareTwoThreadsPlusOnePerStalledCallback() throws {
        // The loops of the tests before have stopped: the threads counted are this test's.
        waitForLoopThreads(atMost: 0)
        let mostBeyondDeposed = LockedValue(0)
        let mostThreads = LockedValue(0)
        let sharedLoop = LockedValue<EventLoop?>(nil)
        let delivered = LockedValue(0)
        let allDelivered = expectation(description: "every change delivered")
        let bursts = 2
        let count = scale == .stress ? 1_000 : 100
        var watchers: [DirectoryWatcher] = []
        for index in 0..<count {
            let path = directory.mkdir("d\(index)")
            watchers.append(
                try DirectoryWatcher.watchFolder(path: path) { changes in
                    // A delegate that lists its directory and takes 2 ms doing so.
                    let start = DispatchTime.now().uptimeNanoseconds
                    repeat {
                        _ = try? FileManager.default.contentsOfDirectory(atPath: path)
                    } while DispatchTime.now().uptimeNanoseconds - start < 2_000_000
                    // The loop's threads by the process's registry, not /proc/self/task, which
                    // also lists, for a moment, a thread that has left the loop and is exiting.
                    if let census = sharedLoop.get()?.threads.census() {
                        mostBeyondDeposed.update { $0 = max($0, census.running - census.deposed) }
                        mostThreads.update { $0 = max($0, census.running) }
                    }
                    var total = 0
                    delivered.update {
                        $0 += changes.count
                        total = $0
                    }
                    if total == count * bursts { allDelivered.fulfill() }
                })
        }
        // Every watcher of the process shares one loop (the file changes below start its callbacks).
        sharedLoop.update { $0 = watchers[0].eventLoop }
        XCTAssertNotNil(sharedLoop.get())
        defer { for watcher in watchers { watcher.invalidate() } }
        for burst in 0..<bursts {
            for index in 0..<count { directory.touch("d\(index)/burst\(burst)") }
        }
        wait(for: [allDelivered], timeout: 120)
        XCTAssertLessThanOrEqual(
            mostBeyondDeposed.get(), 2,
            "loop threads beyond those still in a stalled callback (a leader and a standby); at most \(mostThreads.get()) in all"
        )
        // Once the callbacks are done: the leader and the standby, whatever happened on the way.
        waitForLoopThreads(atMost: 2)
        XCTAssertLessThanOrEqual(ProcessResources.loopThreads(), 2)
    }

    /// Blocks the watcher's callback while `total` files are created, until every change has
    /// been read (a probe watcher's barrier says so), then releases it and waits for delivery.
    private func blockWhileCreating(
        _ total: Int, recovery: DirectoryWatcher.Recovery, thenAfterOverflow later: [String] = []
    ) throws -> [DirectoryChange] {
        let release = DispatchSemaphore(value: 0)
        let started = expectation(description: "blocked")
        let options = DirectoryWatcher.Options(recovery: recovery)
        try watch {
            try DirectoryWatcher.make(
                path: directory.path, options: options, delegate: $0, queue: nil,
                backlog: DirectoryWatcher.Backlog(limit: backlogLimit))
        }
        recorder.onFirstBatch { _, _ in
            started.fulfill()
            release.wait()
        }
        // A watcher of another directory: its barrier completes once every event before it has
        // been read, so all the changes below reach the blocked watcher while it is blocked.
        let probeDirectory = TemporaryDirectory()
        let probe = try DirectoryWatcher.watchFolder(path: probeDirectory.path) { _ in }
        defer { probe.invalidate() }
        directory.touch("first")
        wait(for: [started], timeout: 10)
        for index in 0..<total { directory.touch("f\(index)") }
        waitForDelivery(probe)
        // Every change above has been read, so the backlog has overflowed: these are dropped.
        for name in later { directory.touch(name) }
        if !later.isEmpty { waitForDelivery(probe) }
        release.signal()
        waitForDelivery(watcher)
        return recorder.changes
    }

    func testABlockedCallbacksBacklogEndsInOneOverflowInsteadOfGrowing() throws {
        let changes = try blockWhileCreating(backlogLimit + backlogLimit / 8, recovery: .notice)
        let overflows = changes.filter { $0.kind == .overflow }
        // The backlog's notice; the kernel's too when its queue overflowed before the standby
        // took over (a slow machine).
        XCTAssertTrue((1...2).contains(overflows.count), "\(overflows)")
        XCTAssertLessThanOrEqual(changes.count, backlogLimit + 2, "the backlog stayed bounded")
        // What came before the overflow is the changes in order, none missing.
        let before = changes.prefix { $0.kind != .overflow }
        let expected = [directory.url("first")] + (0..<(before.count - 1)).map { directory.url("f\($0)") }
        XCTAssertEqual(before.map(\.path), expected.map { FileSystemPath($0) })
    }

    func testAfterABlockedCallbacksBacklogOverflowedItCatchesUpExactly() throws {
        let total = backlogLimit + backlogLimit / 8
        let later = (0..<100).map { "later-\($0)" }
        let changes = try blockWhileCreating(total, recovery: .exact, thenAfterOverflow: later)
        let notice = try XCTUnwrap(changes.firstIndex { $0.kind == .overflow })
        XCTAssertLessThanOrEqual(notice, backlogLimit, "the backlog stayed bounded while blocked")
        XCTAssertFalse(changes[..<notice].contains { $0.foundByRescan })
        let created = changes.filter { $0.kind == .created }.map(\.path)
        XCTAssertEqual(created.count, total + 1 + later.count, "each file once")
        let expected = [directory.url("first")] + (0..<total).map { directory.url("f\($0)") } + later.map(directory.url)
        XCTAssertEqual(Set(created), Set(expected.map { FileSystemPath($0) }))
        // Made once the backlog had overflowed, so dropped: only the listing can have found them.
        // (How the rest splits between what did not fit and what the listing found depends on
        // how far the reading had got when the backlog overflowed.)
        let foundLater = changes.filter { $0.foundByRescan && $0.path.description.contains("/later-") }
        XCTAssertEqual(foundLater.count, later.count)
        // And it is watching as before.
        let late = directory.touch("late")
        XCTAssertEqual(delivered().filter { $0.path == FileSystemPath(late) }.map(\.kind), [.created])
    }

    func testLoopThreadsLeaveTheProcessSignalsToTheAppsThreads() throws {
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
        directory.touch("start-the-standby")
        waitForDelivery(watcher)
        var checked = 0
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [] {
            let status = (try? String(contentsOfFile: "/proc/self/task/\(task)/status", encoding: .utf8)) ?? ""
            let fields = Dictionary(
                status.split(separator: "\n").compactMap { line -> (String, String)? in
                    let parts = line.split(separator: ":", maxSplits: 1)
                    guard parts.count == 2 else { return nil }
                    return (String(parts[0]), parts[1].trimmingCharacters(in: .whitespaces))
                }, uniquingKeysWith: { first, _ in first })
            guard fields["Name"] == EventLoop.threadName, let blocked = UInt64(fields["SigBlk"] ?? "", radix: 16) else {
                continue
            }
            for signal in [SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGCHLD] {
                XCTAssertNotEqual(blocked & (1 << UInt64(signal - 1)), 0, "signal \(signal) blocked on thread \(task)")
            }
            checked += 1
        }
        XCTAssertGreaterThanOrEqual(checked, 2, "the leader and the standby")
    }

    func testWatchingAndInvalidatingInsideACallbackDoNotWaitForTheStandby() throws {
        let other = TemporaryDirectory()
        let made = LockedValue<DirectoryWatcher?>(nil)
        let otherRecorder = Recorder()
        let done = expectation(description: "callback finished")
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
        recorder.onFirstBatch { watcher, _ in
            // Both run on the leader, inline, with no hand-off.
            made.set(try? DirectoryWatcher.watchFolder(path: other.path, delegate: otherRecorder))
            watcher.invalidate()
            done.fulfill()
        }
        directory.touch("go")
        wait(for: [done], timeout: 10)
        let second = try XCTUnwrap(made.get())
        defer { second.invalidate() }
        let file = other.touch("seen")
        waitForDelivery(second)
        XCTAssertEqual(otherRecorder.changes, [DirectoryChange(.created, file)])
    }
}
