import Foundation
import Synchronization
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// A clock the test moves by hand; the loop reads it at each wake-up.
final class ManualClock: Sendable {
    private let value = Atomic<UInt64>(1_000_000_000)
    var now: UInt64 { value.load(ordering: .acquiring) }
    func advance(by nanoseconds: UInt64) { value.add(nanoseconds, ordering: .acquiringAndReleasing) }
    func advance(milliseconds: UInt64) { advance(by: milliseconds * 1_000_000) }
}

/// Settled watchers end to end: real files, the real kernel, the event loop on a clock the test
/// moves by hand (so a quiet period passes when the test says so, and never during a test that
/// checks that nothing came).
///
/// A second, unsettled watcher of the same directory on the same loop (the probe) says when the
/// loop has routed everything made so far: its barrier completes after the loop has read those
/// events. Both deliver on the loop's thread, in the order the loop scheduled them, so once the
/// clock has moved, a barrier requested after one that completed in a wake-up at the new time
/// completes after whatever that wake-up released (see ``pass(milliseconds:on:probe:in:)``).
final class SettledWatcherTests: XCTestCase {
    private var directory: TemporaryDirectory!
    private var clock: ManualClock!
    private var loop: EventLoop!
    private var probe: DirectoryWatcher!
    private let batches = LockedValue<[[DirectoryChange]]>([])
    /// The delegates (a watcher holds its delegate weakly).
    private var delegates: [ClosureRecorder] = []

    override func setUpWithError() throws {
        directory = TemporaryDirectory()
        let clock = ManualClock()
        self.clock = clock
        loop = try EventLoop(clock: { clock.now })
        probe = try DirectoryWatcher.make(
            path: directory.path, options: .init(delivery: .eventLoopThread), delegate: Recorder(), queue: nil,
            loop: loop)
    }

    override func tearDown() {
        probe.invalidate()
        loop.shutdown()
        directory = nil
    }

    private func watch(
        _ settling: DirectoryWatcher.Settling, events: DirectoryWatcher.Events = .default, recursive: Bool = false,
        backend: DirectoryWatcher.Backend = .automatic
    ) throws -> DirectoryWatcher {
        let batches = batches
        let delegate = ClosureRecorder { changes in batches.update { $0.append(changes) } }
        delegates.append(delegate)
        return try DirectoryWatcher.make(
            path: directory.path,
            options: .init(
                events: events, delivery: .eventLoopThread, recursive: recursive, settling: settling, backend: backend),
            delegate: delegate, queue: nil, loop: loop)
    }

    /// Returns once the loop has routed every change made so far at the clock's present time,
    /// then moves the clock on and returns once the loop has looked at the deadlines at the new
    /// time and delivered what was due.
    private func pass(milliseconds: UInt64) {
        Self.pass(milliseconds: milliseconds, on: clock, probe: probe, in: self)
    }

    /// ``pass(milliseconds:)`` for a loop of the test's own.
    static func pass(milliseconds: UInt64, on clock: ManualClock, probe: DirectoryWatcher, in test: XCTestCase) {
        test.waitForDelivery(probe)
        clock.advance(milliseconds: milliseconds)
        // A wake-up that read the clock before it moved may still take the next barrier's
        // request: the first barrier after the move completes in a wake-up that read the new
        // time (and released what was due then, behind that completion); the second, once what
        // it released has been delivered.
        test.waitForDelivery(probe)
        test.waitForDelivery(probe)
    }

    /// The writer, on the test's clock: a 64 KiB append every 150 ms for two seconds,
    /// then a close. Nothing while it writes; one batch a quiet period after the close.
    func testAFileWrittenInChunksIsReportedOnceAQuietPeriodAfterItIsClosed() throws {
        let watcher = try watch(.init(quietPeriod: .milliseconds(300)))
        defer { watcher.invalidate() }
        let path = directory.url("upload.bin")
        let fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let chunk = [UInt8](repeating: 0x5A, count: 64 * 1024)
        for _ in 0..<14 {
            XCTAssertEqual(write(fd, chunk, chunk.count), chunk.count)
            pass(milliseconds: 150)
            XCTAssertEqual(batches.get(), [], "nothing while it writes")
        }
        // A writer that pauses far longer than the quiet period still holds the batch.
        pass(milliseconds: 2_000)
        XCTAssertEqual(batches.get(), [])
        close(fd)
        pass(milliseconds: 299)
        XCTAssertEqual(batches.get(), [], "not before the quiet period has passed")
        pass(milliseconds: 1)
        XCTAssertEqual(batches.get(), [[DirectoryChange(.created, path)]])
    }

    /// With comparesContent: a rewrite of the same bytes is not reported; other bytes of the
    /// same size, with the file's times set back as they were, are.
    func testARewriteOfTheSameBytesIsNotReportedWhenComparingContent() throws {
        let watcher = try watch(.init(quietPeriod: .milliseconds(50), comparesContent: true))
        defer { watcher.invalidate() }
        let path = directory.touch("config")
        directory.write("config", "v1")
        pass(milliseconds: 50)
        XCTAssertEqual(batches.get(), [[DirectoryChange(.created, path)]])

        directory.touch("config")
        directory.write("config", "v1")
        pass(milliseconds: 50)
        XCTAssertEqual(batches.get().count, 1, "the same bytes: nothing")

        var before = stat()
        XCTAssertEqual(stat(path, &before), 0)
        directory.touch("config")
        directory.write("config", "v2")
        var times = [before.st_atim, before.st_mtim]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
        pass(milliseconds: 50)
        XCTAssertEqual(batches.get().count, 2)
        XCTAssertEqual(batches.get().last?.filter { $0.kind == .modified }, [DirectoryChange(.modified, path)])

        // Without the option, the same bytes are a write like any other.
        let plain = try watch(.init(quietPeriod: .milliseconds(50)))
        defer { plain.invalidate() }
        directory.touch("config")
        directory.write("config", "v2")
        pass(milliseconds: 50)
        XCTAssertEqual(batches.get().count, 3, "the plain watcher's batch only")
        XCTAssertEqual(batches.get().last, [DirectoryChange(.modified, path)])
    }

    /// A version-control operation in a watched tree, as git does a checkout, on the test's
    /// clock: the index's lock made, files written with pauses far longer than the quiet period,
    /// the lock renamed onto the index. One batch, a quiet period after the rename.
    func testAVersionControlLockHoldsTheBatchUntilItIsGone() throws {
        directory.mkdir(".git")
        let watcher = try watch(.init(quietPeriod: .milliseconds(100)), recursive: true, backend: .inotify)
        defer { watcher.invalidate() }
        directory.touch(".git/index.lock")
        for index in 0..<3 {
            directory.touch("file-\(index)")
            directory.write("file-\(index)", "checked out")
            pass(milliseconds: 500)
            XCTAssertEqual(batches.get(), [], "nothing while the lock exists")
        }
        XCTAssertEqual(rename(directory.url(".git/index.lock"), directory.url(".git/index")), 0)
        pass(milliseconds: 99)
        XCTAssertEqual(batches.get(), [])
        pass(milliseconds: 1)
        XCTAssertEqual(batches.get().count, 1)
        XCTAssertEqual(
            Set(batches.get().first ?? []),
            [
                DirectoryChange(.created, directory.url(".git/index")),
                DirectoryChange(.created, directory.url("file-0")),
                DirectoryChange(.created, directory.url("file-1")), DirectoryChange(.created, directory.url("file-2")),
            ])
    }

    func testAWriterThatNeverClosesGetsABatchAtTheMaximumWait() throws {
        let watcher = try watch(.init(quietPeriod: .milliseconds(100), maximumWait: .seconds(1)))
        defer { watcher.invalidate() }
        let path = directory.touch("log")
        pass(milliseconds: 0)
        let fd = open(path, O_WRONLY | O_APPEND)
        defer { close(fd) }
        for _ in 0..<9 {
            XCTAssertEqual(write(fd, "line\n", 5), 5)
            pass(milliseconds: 100)
        }
        XCTAssertEqual(batches.get(), [])
        pass(milliseconds: 100)
        XCTAssertEqual(batches.get(), [[DirectoryChange(.created, path)]], "the maximum wait after the first change")
    }

    func testABarrierWaitsForTheChangesBeforeItToSettle() throws {
        let watcher = try watch(.init(quietPeriod: .milliseconds(300)))
        defer { watcher.invalidate() }
        let path = directory.touch("a")
        let completed = LockedValue<[[DirectoryChange]]?>(nil)
        let barrier = expectation(description: "settled barrier")
        let batches = batches
        watcher.barrier {
            completed.set(batches.get())
            barrier.fulfill()
        }
        pass(milliseconds: 0)
        pass(milliseconds: 200)
        XCTAssertNil(completed.get(), "the change before it has not settled")
        pass(milliseconds: 100)
        wait(for: [barrier], timeout: 20)
        XCTAssertEqual(completed.get(), [[DirectoryChange(.created, path)]], "after the batch")
        waitForDelivery(watcher)  // with nothing waiting, at once
    }

    func testCoalescingEndToEnd() throws {
        let watcher = try watch(.init(quietPeriod: .milliseconds(50)))
        defer { watcher.invalidate() }
        directory.touch("existing")
        directory.mkdir("tree")
        directory.touch("tree/inside")
        pass(milliseconds: 50)
        batches.set([])
        // Created then written then renamed twice; an existing file written then renamed; a
        // file created and removed; a directory removed with its contents.
        directory.touch("new")
        directory.write("new", "data")
        XCTAssertEqual(rename(directory.url("new"), directory.url("newer")), 0)
        XCTAssertEqual(rename(directory.url("newer"), directory.url("newest")), 0)
        directory.write("existing", "more")
        XCTAssertEqual(rename(directory.url("existing"), directory.url("kept")), 0)
        directory.touch("scratch")
        XCTAssertEqual(unlink(directory.url("scratch")), 0)
        XCTAssertEqual(unlink(directory.url("tree/inside")), 0)
        XCTAssertEqual(rmdir(directory.url("tree")), 0)
        pass(milliseconds: 0)
        XCTAssertEqual(batches.get(), [])
        pass(milliseconds: 50)
        XCTAssertEqual(
            batches.get(),
            [
                [
                    DirectoryChange(.created, directory.url("newest")),
                    DirectoryChange(.renamed, directory.url("kept"), from: directory.url("existing")),
                    DirectoryChange(.modified, directory.url("kept")),
                    DirectoryChange(.removed, directory.url("tree"), directory: true),
                ]
            ])
    }

    /// `rm -rf` of a directory in a watched tree: one removal, not one per entry (unless asked).
    func testATreesDirectoryRemovedWithItsContentsIsOneRemoval() throws {
        for (listsRemovedContents, backend) in [
            (false, DirectoryWatcher.Backend.inotify), (true, .inotify), (false, .fanotify), (true, .fanotify),
        ] {
            directory.mkdir("build")
            directory.mkdir("build/objects")
            for name in ["build/a.o", "build/objects/b.o", "build/objects/c.o"] { directory.touch(name) }
            let watcher = try watch(
                .init(quietPeriod: .milliseconds(50), listsRemovedContents: listsRemovedContents), recursive: true,
                backend: backend)
            defer { watcher.invalidate() }
            try FileManager.default.removeItem(atPath: directory.url("build"))
            pass(milliseconds: 50)
            let changes = Array(batches.get().joined())
            if listsRemovedContents {
                XCTAssertEqual(
                    Set(changes),
                    Set(
                        ["build/a.o", "build/objects/b.o", "build/objects/c.o"].map {
                            DirectoryChange(.removed, directory.url($0))
                        }
                            + ["build/objects", "build"].map {
                                DirectoryChange(.removed, directory.url($0), directory: true)
                            }))
                XCTAssertEqual(changes.last, DirectoryChange(.removed, directory.url("build"), directory: true))
            } else {
                XCTAssertEqual(changes, [DirectoryChange(.removed, directory.url("build"), directory: true)])
            }
            batches.set([])
        }
    }

    /// `mkdir -p` and files written in it, in a watched tree: each entry once, as created, with
    /// its path; nothing of the writing.
    func testANewTreeIsReportedAsCreatedOnceItIsWritten() throws {
        try newTreeIsReportedAsCreatedOnceItIsWritten(backend: .inotify)
    }

    func testANewTreeIsReportedAsCreatedOnceItIsWrittenThroughFanotify() throws {
        try newTreeIsReportedAsCreatedOnceItIsWritten(backend: .fanotify)
    }

    private func newTreeIsReportedAsCreatedOnceItIsWritten(backend: DirectoryWatcher.Backend) throws {
        let watcher = try watch(.init(quietPeriod: .milliseconds(50)), recursive: true, backend: backend)
        defer { watcher.invalidate() }
        try FileManager.default.createDirectory(
            atPath: directory.url("out/x/y"), withIntermediateDirectories: true)
        directory.touch("out/x/y/report.txt")
        directory.write("out/x/y/report.txt", "done")
        XCTAssertEqual(rename(directory.url("out/x"), directory.url("out/z")), 0)
        pass(milliseconds: 50)
        XCTAssertEqual(
            batches.get(),
            [
                [
                    DirectoryChange(.created, directory.url("out"), directory: true),
                    DirectoryChange(.created, directory.url("out/z"), directory: true),
                    DirectoryChange(.created, directory.url("out/z/y"), directory: true),
                    DirectoryChange(.created, directory.url("out/z/y/report.txt")),
                ]
            ])
    }

    func testTheRootsRemovalHandsTheBatchOverAtOnce() throws {
        let watched = TemporaryDirectory()
        let batches = batches
        let ended = expectation(description: "root removed")
        let delegate = ClosureRecorder { changes in
            batches.update { $0.append(changes) }
            if changes.last?.kind == .rootRemoved { ended.fulfill() }
        }
        let watcher = try DirectoryWatcher.make(
            path: watched.path, options: .init(delivery: .eventLoopThread, settling: .init(quietPeriod: .seconds(60))),
            delegate: delegate, queue: nil, loop: loop)
        defer { watcher.invalidate() }
        watched.touch("f")
        XCTAssertEqual(unlink(watched.url("f")), 0)
        XCTAssertEqual(rmdir(watched.path), 0)
        wait(for: [ended], timeout: 20)
        XCTAssertEqual(batches.get(), [[DirectoryChange(.rootRemoved, watched.path, directory: true)]])
    }

    /// Events lost while a batch settles (a truncated read, as a kernel overflow would be): the
    /// notice comes first in the batch, the rescan's findings are folded into it, each change
    /// once, and no writer is assumed busy any more (its close may be among what was lost).
    func testAnOverflowWhileSettlingComesFirstInTheBatchAndLetsGoOfWriters() throws {
        let inject = LockedValue(false)
        let calls = SystemCalls.live.truncatingNextRead(armed: inject)
        let clock = ManualClock()
        let lossy = try EventLoop(system: System(calls), clock: { clock.now })
        defer { lossy.shutdown() }
        let watched = TemporaryDirectory()
        let batches = batches
        let delegate = ClosureRecorder { changes in batches.update { $0.append(changes) } }
        let probeRecorder = Recorder()
        let probe = try DirectoryWatcher.make(
            path: watched.path, options: .init(delivery: .eventLoopThread), delegate: probeRecorder, queue: nil,
            loop: lossy)
        defer { probe.invalidate() }
        let watcher = try DirectoryWatcher.make(
            path: watched.path,
            options: .init(delivery: .eventLoopThread, settling: .init(quietPeriod: .milliseconds(100))),
            delegate: delegate, queue: nil, loop: lossy)
        defer { watcher.invalidate() }
        // A writer at work: it would hold the batch to the maximum wait.
        let fd = open(watched.url("log"), O_CREAT | O_WRONLY, 0o644)
        XCTAssertEqual(write(fd, "a", 1), 1)
        waitForDelivery(probe)
        inject.set(true)
        watched.touch("x")
        Self.pass(milliseconds: 100, on: clock, probe: probe, in: self)
        close(fd)
        let changes = Array(batches.get().joined())
        XCTAssertEqual(changes.first, DirectoryChange(.overflow, watched.path, directory: true), "\(changes)")
        XCTAssertEqual(
            Set(changes.dropFirst().map { DirectoryChange(.created, $0.path.description) }),
            [DirectoryChange(.created, watched.url("log")), DirectoryChange(.created, watched.url("x"))])
        XCTAssertEqual(changes.count, 3, "each change once")
    }

    /// Settled batches on a Dispatch queue, and a barrier behind them there.
    func testSettledBatchesOnAQueue() throws {
        let watched = TemporaryDirectory()
        let queue = DispatchQueue(label: "settled")
        let delivered = expectation(description: "a settled batch")
        let seen = LockedValue<[DirectoryChange]>([])
        let watcher = try DirectoryWatcher.watchFolder(
            path: watched.path, options: .init(settling: .init(quietPeriod: .milliseconds(20))), queue: queue
        ) { changes in
            dispatchPrecondition(condition: .onQueue(queue))
            seen.update { $0 += changes }
            delivered.fulfill()
        }
        defer { watcher.invalidate() }
        watched.touch("a")
        watched.write("a", "text")
        wait(for: [delivered], timeout: 20)
        waitForDelivery(watcher)
        XCTAssertEqual(seen.get(), [DirectoryChange(.created, watched.url("a"))])
    }

    /// A barrier waiting for a batch to settle still completes when the watcher is invalidated
    /// first, or when the loop stops: nothing waits for ever.
    func testABarrierWaitingForABatchCompletesWhenTheWatcherGoes() throws {
        let watcher = try watch(.init(quietPeriod: .seconds(60)))
        directory.touch("a")
        let first = expectation(description: "barrier after invalidate")
        watcher.barrier { first.fulfill() }
        pass(milliseconds: 0)
        watcher.invalidate()
        wait(for: [first], timeout: 20)
        XCTAssertEqual(batches.get(), [], "an invalidated watcher is told nothing more")

        let ownClock = ManualClock()
        let own = try EventLoop(clock: { ownClock.now })
        let ownProbe = try DirectoryWatcher.make(
            path: directory.path, options: .init(delivery: .eventLoopThread), delegate: Recorder(), queue: nil,
            loop: own)
        let other = try DirectoryWatcher.make(
            path: directory.path,
            options: .init(delivery: .eventLoopThread, settling: .init(quietPeriod: .seconds(60))),
            delegate: Recorder(), queue: nil, loop: own)
        directory.touch("b")
        let second = expectation(description: "barrier after the loop stopped")
        other.barrier { second.fulfill() }
        Self.pass(milliseconds: 0, on: ownClock, probe: ownProbe, in: self)
        own.shutdown()
        wait(for: [second], timeout: 20)
        other.invalidate()
        ownProbe.invalidate()
    }

    /// A settled file watch: an editor's save (a new file written, then renamed over the old) is
    /// one change, once the writing is over.
    func testASettledFileWatchSeesASaveOnce() throws {
        let file = directory.touch("config.json")
        let batches = batches
        let delegate = ClosureRecorder { changes in batches.update { $0.append(changes) } }
        delegates.append(delegate)
        let watcher = try DirectoryWatcher.make(
            path: file, options: .init(delivery: .eventLoopThread, settling: .init(quietPeriod: .milliseconds(50))),
            watchesFile: true, delegate: delegate, queue: nil, loop: loop)
        defer { watcher.invalidate() }
        directory.touch("config.json.tmp")
        directory.write("config.json.tmp", "{}")
        XCTAssertEqual(rename(directory.url("config.json.tmp"), file), 0)
        directory.touch("unrelated")
        pass(milliseconds: 50)
        // As unsettled: the file watch covers its own name, so the save is the rename onto it.
        XCTAssertEqual(batches.get(), [[DirectoryChange(.renamed, file, from: directory.url("config.json.tmp"))]])
    }

    /// Event-driven: the loop sleeps with a timeout only while a settled batch waits, and with
    /// none once it has been delivered (no timer, no polling, while the directory is idle).
    func testTheLoopSleepsWithoutATimeoutOnceNothingWaits() throws {
        let sleeps = SleepRecorder(self, description: "an epoll_wait with no timeout once idle")
        let timeouts = sleeps.timeouts
        let clock = ManualClock()
        let own = try EventLoop(system: System(sleeps.calls), clock: { clock.now })
        defer { own.shutdown() }
        // Notice-only recovery: no snapshot, so no timer of its own for learning inodes.
        let ownProbe = try DirectoryWatcher.make(
            path: directory.path, options: .init(delivery: .eventLoopThread, recovery: .notice), delegate: Recorder(),
            queue: nil, loop: own)
        defer { ownProbe.invalidate() }
        let settled = Recorder()
        let watcher = try DirectoryWatcher.make(
            path: directory.path,
            options: .init(
                delivery: .eventLoopThread, recovery: .notice, settling: .init(quietPeriod: .milliseconds(100))),
            delegate: settled, queue: nil, loop: own)
        defer { watcher.invalidate() }
        directory.touch("a")
        waitForDelivery(ownProbe)
        timeouts.set([])
        waitForDelivery(ownProbe)
        XCTAssertTrue(
            timeouts.get().contains { $0 > 0 && $0 <= 100_000_000 },
            "a timeout to the batch's deadline while it waits: \(timeouts.get())")
        XCTAssertFalse(timeouts.get().contains { $0 < 0 }, "no sleep without a timeout while a batch waits")
        Self.pass(milliseconds: 100, on: clock, probe: ownProbe, in: self)
        XCTAssertEqual(settled.changes, [DirectoryChange(.created, directory.url("a"))])
        sleeps.idle.set(true)
        waitForDelivery(ownProbe)  // a wake-up after which the loop goes back to sleep
        wait(for: [sleeps.sleptForEver], timeout: 20)
    }

    func testSettlingThatCannotBeUsedIsRefusedNamingThePath() {
        for (settling, words) in [
            (DirectoryWatcher.Settling(quietPeriod: .zero), "quiet period must be more than zero"),
            (DirectoryWatcher.Settling(quietPeriod: .milliseconds(-5)), "quiet period must be more than zero"),
            (
                DirectoryWatcher.Settling(quietPeriod: .seconds(2), maximumWait: .seconds(1)),
                "at least the quiet period"
            ),
        ] {
            XCTAssertThrowsError(
                try DirectoryWatcher.watchFolder(
                    path: directory.path, options: .init(settling: settling), delegate: Recorder())
            ) { error in
                let error = error as? DirectoryWatcherError
                XCTAssertEqual(error?.code, .invalidOption)
                let message = error?.description ?? ""
                XCTAssertTrue(message.contains(directory.path) && message.contains(words), message)
            }
        }
    }

    func testTheDefaultMaximumWait() {
        XCTAssertEqual(DirectoryWatcher.Settling(quietPeriod: .milliseconds(300)).maximumWait, .seconds(10))
        XCTAssertEqual(DirectoryWatcher.Settling(quietPeriod: .seconds(5)).maximumWait, .seconds(20))
    }
}

/// A delegate that hands each batch to a closure.
final class ClosureRecorder: DirectoryWatcherDelegate, Sendable {
    let body: @Sendable ([DirectoryChange]) -> Void
    init(_ body: @escaping @Sendable ([DirectoryChange]) -> Void) { self.body = body }
    func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) { body(changes) }
}
