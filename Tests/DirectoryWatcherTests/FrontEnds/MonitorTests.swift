import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Watchers that start and stop (the seeds' `Monitor` and MHWDirectoryWatcher's
/// `startWatching`/`stopWatching`), and groups of them.
final class MonitorTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUp() {
        super.setUp()
        directory = TemporaryDirectory()
    }

    override func tearDown() {
        directory = nil
        super.tearDown()
    }

    /// Waits until the loop has handled everything asked of it before: a stop's unsubscribe
    /// runs on the loop, and a barrier follows it there.
    private func settle(_ watcher: DirectoryWatcher) {
        waitForDelivery(watcher)
    }

    func testAWatcherMadeWithAnInitializerStartsWhenToldAndNotBefore() throws {
        let recorder = Recorder()
        let watcher = try DirectoryWatcher(path: directory.path, delegate: recorder)
        defer { watcher.invalidate() }
        XCTAssertFalse(watcher.isMonitoring)
        XCTAssertFalse(watcher.isValid)
        XCTAssertFalse(ProcessResources.isWatched(directory.path), "no kernel watch before it starts")
        directory.touch("before")
        XCTAssertTrue(try watcher.startMonitoring())
        XCTAssertFalse(try watcher.startMonitoring(), "started already")
        XCTAssertTrue(watcher.isMonitoring)
        XCTAssertTrue(ProcessResources.isWatched(directory.path))
        let file = directory.touch("after")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes, [DirectoryChange(.created, file)], "nothing from before it started")
    }

    func testAStoppedWatcherHoldsNoKernelWatchAndReportsAgainOnceRestarted() throws {
        let recorder = Recorder()
        let watcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: recorder)
        defer { watcher.invalidate() }
        let first = directory.touch("first")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes, [DirectoryChange(.created, first)])

        XCTAssertTrue(watcher.stopMonitoring())
        XCTAssertFalse(watcher.stopMonitoring(), "stopped already")
        XCTAssertFalse(watcher.isMonitoring)
        settle(watcher)
        XCTAssertFalse(ProcessResources.isWatched(directory.path), "no kernel watch while stopped")
        directory.touch("while-stopped")

        XCTAssertTrue(try watcher.startMonitoring())
        let again = directory.touch("again")
        waitForDelivery(watcher)
        XCTAssertEqual(
            recorder.changes, [DirectoryChange(.created, first), DirectoryChange(.created, again)],
            "reports again, and nothing of what happened while stopped")
    }

    func testManyStopsAndStartsLeaveNothingBehind() throws {
        let descriptors = ProcessResources.openDescriptors()
        let recorder = Recorder()
        let watcher = try DirectoryWatcher(path: directory.path, delegate: recorder, queue: .global())
        for round in 0..<50 {
            XCTAssertTrue(try watcher.startMonitoring())
            directory.touch("f\(round)")
            waitForDelivery(watcher)
            XCTAssertTrue(watcher.stopMonitoring())
        }
        XCTAssertEqual(Set(recorder.changes.map(\.path)).count, 50, "each start saw its file")
        watcher.invalidate()
        SharedEventLoop.waitUntilStopped()
        XCTAssertEqual(ProcessResources.openDescriptors(), descriptors, "every descriptor closed")
    }

    func testStartingAfterInvalidateThrowsAndNamesThePath() throws {
        let watcher = try DirectoryWatcher.watchFolder(path: directory.path) { _ in }
        watcher.invalidate()
        XCTAssertThrowsError(try watcher.startMonitoring()) { error in
            let error = error as? DirectoryWatcherError
            XCTAssertEqual(error?.code, .invalidated)
            XCTAssertEqual(error?.path, FileSystemPath(self.directory.path))
            XCTAssertTrue(error?.description.contains("stopMonitoring()") ?? false, "\(String(describing: error))")
        }
        XCTAssertFalse(watcher.isMonitoring)
    }

    func testAMissingDirectoryFailsToStartAndCanStartOnceItExists() throws {
        let path = directory.url("later")
        let recorder = Recorder()
        let watcher = try DirectoryWatcher(path: path, delegate: recorder)
        defer { watcher.invalidate() }
        XCTAssertThrowsError(try watcher.startMonitoring()) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .noSuchPath)
            XCTAssertEqual((error as? DirectoryWatcherError)?.path, FileSystemPath(path))
        }
        XCTAssertFalse(watcher.isMonitoring)
        directory.mkdir("later")
        XCTAssertTrue(try watcher.startMonitoring())
        let file = directory.touch("later/file")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes, [DirectoryChange(.created, file)])
    }

    func testAnInitializerRefusesAnEmptyPath() {
        XCTAssertThrowsError(try DirectoryWatcher(path: "") { _ in }) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .emptyPath)
        }
    }

    func testAWatcherWhoseDirectoryWentAwayStopsAndCanStartAgain() throws {
        let path = directory.mkdir("comes-and-goes")
        let recorder = Recorder()
        let watcher = try DirectoryWatcher.watchFolder(path: path, delegate: recorder)
        defer { watcher.invalidate() }
        XCTAssertEqual(rmdir(path), 0)
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes.last?.kind, .rootRemoved)
        XCTAssertFalse(watcher.isMonitoring)
        directory.mkdir("comes-and-goes")
        XCTAssertTrue(try watcher.startMonitoring())
        let file = directory.touch("comes-and-goes/back")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes.last, DirectoryChange(.created, file))
    }

    func testAFileWatcherStartsAndStops() throws {
        let file = directory.touch("settings.json")
        let recorder = Recorder()
        let watcher = try DirectoryWatcher(filePath: file, delegate: recorder)
        defer { watcher.invalidate() }
        XCTAssertTrue(try watcher.startMonitoring())
        directory.write("settings.json", "{}")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes, [DirectoryChange(.modified, file)])
        XCTAssertTrue(watcher.stopMonitoring())
        directory.write("settings.json", "{}")
        XCTAssertTrue(try watcher.startMonitoring())
        directory.touch("other")
        directory.write("settings.json", "{}")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes, [DirectoryChange(.modified, file), DirectoryChange(.modified, file)])
    }

    // MARK: - Groups

    func testAGroupStartsAndStopsItsMonitorsTogether() throws {
        let other = TemporaryDirectory()
        let recorder = Recorder()
        let first = try DirectoryWatcher(path: directory.path, delegate: recorder)
        let second = try DirectoryWatcher(path: other.path, delegate: recorder)
        let group = MonitorGroup([first, second])
        XCTAssertFalse(group.isMonitoring)
        XCTAssertTrue(try group.startMonitoring())
        XCTAssertFalse(try group.startMonitoring(), "every member started already")
        XCTAssertTrue(first.isMonitoring && second.isMonitoring)
        let a = directory.touch("a")
        let b = other.touch("b")
        waitForDelivery(first)
        waitForDelivery(second)
        XCTAssertEqual(Set(recorder.changes), [DirectoryChange(.created, a), DirectoryChange(.created, b)])
        XCTAssertTrue(group.stopMonitoring())
        XCTAssertFalse(group.stopMonitoring())
        XCTAssertFalse(first.isMonitoring || second.isMonitoring || group.isMonitoring)
        first.invalidate()
        second.invalidate()
    }

    func testAGroupWhoseSecondMonitorFailsToStartLeavesNoneStarted() throws {
        let first = try DirectoryWatcher(path: directory.path) { _ in }
        let missing = directory.url("missing")
        let second = try DirectoryWatcher(path: missing) { _ in }
        let third = try DirectoryWatcher(path: directory.path) { _ in }
        defer { for watcher in [first, second, third] { watcher.invalidate() } }
        let group = MonitorGroup([first, second, third])
        XCTAssertThrowsError(try group.startMonitoring()) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .noSuchPath)
            XCTAssertEqual(
                (error as? DirectoryWatcherError)?.path, FileSystemPath(missing), "the failing monitor's path")
        }
        XCTAssertFalse(first.isMonitoring, "the first was started, then stopped again")
        XCTAssertFalse(second.isMonitoring)
        XCTAssertFalse(third.isMonitoring, "the third was never started")
        XCTAssertFalse(group.isMonitoring)
        settle(first)
        XCTAssertFalse(ProcessResources.isWatched(directory.path), "no kernel watch left behind")
    }

    func testAGroupLeavesAMonitorThatWasRunningAlreadyRunning() throws {
        let running = try DirectoryWatcher.watchFolder(path: directory.path) { _ in }
        let failing = try DirectoryWatcher(path: directory.url("missing")) { _ in }
        defer {
            running.invalidate()
            failing.invalidate()
        }
        XCTAssertThrowsError(try MonitorGroup([running, failing]).startMonitoring())
        XCTAssertTrue(running.isMonitoring, "it was not this group's to undo")
    }

    func testGroupsNest() throws {
        let first = try DirectoryWatcher(path: directory.path) { _ in }
        let second = try DirectoryWatcher(path: directory.path) { _ in }
        defer {
            first.invalidate()
            second.invalidate()
        }
        let outer = MonitorGroup([MonitorGroup([first]), second])
        XCTAssertTrue(try outer.startMonitoring())
        XCTAssertTrue(first.isMonitoring && second.isMonitoring)
        XCTAssertTrue(outer.stopMonitoring())
        XCTAssertFalse(first.isMonitoring || second.isMonitoring)
    }

    // MARK: - From many threads at once

    /// Four threads start, stop, pause and resume one watcher at random while a fifth makes
    /// files: nothing crashes or hangs, callbacks never overlap, and once it is started and
    /// resumed again it reports as before. Run under both sanitizers by CI.
    func testStartStopPauseAndResumeFromManyThreadsAtOnce() throws {
        let inCallback = LockedValue(false)
        let overlapped = LockedValue(false)
        let recorder = Recorder()
        recorder.onBatch = { _, _ in
            inCallback.update { busy in
                if busy { overlapped.set(true) }
                busy = true
            }
            inCallback.set(false)
        }
        let watcher = try DirectoryWatcher(path: directory.path, delegate: recorder)
        defer { watcher.invalidate() }
        let group = DispatchGroup()
        let directory = directory!
        for seed in 0..<4 {
            DispatchQueue.global().async(group: group) {
                var random = SplitMix64(seed: UInt64(seed))
                for _ in 0..<150 {
                    switch random.next() % 4 {
                    case 0: _ = try? watcher.startMonitoring()
                    case 1: watcher.stopMonitoring()
                    case 2: watcher.pause()
                    default: watcher.resume()
                    }
                }
            }
        }
        DispatchQueue.global().async(group: group) {
            for index in 0..<300 { directory.touch("f\(index % 50)") }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success, "no thread hung")
        XCTAssertFalse(overlapped.get(), "callbacks never overlapped")
        _ = try watcher.startMonitoring()
        watcher.resume()
        waitForDelivery(watcher)
        recorder.reset()
        let marker = directory.touch("marker")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes.filter { !$0.whilePaused }, [DirectoryChange(.created, marker)])
        XCTAssertTrue(watcher.stopMonitoring())
        waitForDelivery(watcher)
        XCTAssertFalse(ProcessResources.isWatched(directory.path), "no start left a subscription behind")
    }
}
