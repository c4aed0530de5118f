import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Pause and resume: no callback while paused, then one batch with what changed meanwhile.
final class PauseTests: WatchedDirectoryTestCase {
    /// The changes of the one batch `resume()` delivers (checked to be one batch).
    private func resumeAndTakeBatch(file: StaticString = #filePath, line: UInt = #line) -> [DirectoryChange] {
        let batchesBefore = recorder.batches
        XCTAssertTrue(watcher.resume(), file: file, line: line)
        let changes = delivered()
        XCTAssertEqual(recorder.batches, batchesBefore + (changes.isEmpty ? 0 : 1), "one batch", file: file, line: line)
        XCTAssertFalse(watcher.isPaused, file: file, line: line)
        return changes
    }

    func testChangesMadeWhilePausedComeAsOneBatchOnResume() throws {
        directory.touch("modify.txt")
        directory.touch("old.txt")
        directory.touch("remove.txt")
        directory.touch("untouched.txt")
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
        XCTAssertTrue(watcher.pause())
        XCTAssertFalse(watcher.pause(), "paused already")
        XCTAssertTrue(watcher.isPaused)
        XCTAssertTrue(watcher.isMonitoring, "a paused watcher still monitors")

        let created = directory.touch("new.txt")
        directory.write("modify.txt", "more")
        XCTAssertEqual(rename(directory.url("old.txt"), directory.url("renamed.txt")), 0)
        XCTAssertEqual(unlink(directory.url("remove.txt")), 0)
        XCTAssertEqual(delivered(), [], "no callback while paused")
        XCTAssertEqual(recorder.batches, 0)

        let batch = resumeAndTakeBatch()
        func whilePaused(_ kind: DirectoryChange.Kind, _ path: String, from old: String? = nil) -> DirectoryChange {
            var change = DirectoryChange(kind, path, from: old)
            change.whilePaused = true
            return change
        }
        XCTAssertEqual(
            Set(batch),
            [
                whilePaused(.created, created),
                whilePaused(.modified, directory.url("modify.txt")),
                whilePaused(.renamed, directory.url("renamed.txt"), from: directory.url("old.txt")),
                whilePaused(.removed, directory.url("remove.txt")),
            ])
        XCTAssertEqual(batch.count, 4, "each change once: \(batch)")

        // And then as before.
        let later = directory.touch("later")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, later)])
    }

    func testResumingAfterNothingChangedListsNothingAndDeliversNothing() throws {
        let openedDirectories = LockedValue(0)
        var calls = SystemCalls.live
        let open = calls.openDirectory
        calls.openDirectory = { path, noFollow in
            openedDirectories.update { $0 += 1 }
            return open(path, noFollow)
        }
        let loop = try EventLoop(system: System(calls))
        defer { loop.shutdown() }
        for index in 0..<100 { directory.touch("f\(index)") }
        try watch { try DirectoryWatcher.make(path: directory.path, delegate: $0, queue: nil, loop: loop) }
        waitForDelivery(watcher)
        let listed = openedDirectories.get()
        XCTAssertTrue(watcher.pause())
        // Another directory's changes are not this watcher's.
        let elsewhere = TemporaryDirectory()
        elsewhere.touch("noise")
        XCTAssertEqual(resumeAndTakeBatch(), [])
        XCTAssertEqual(recorder.batches, 0, "no callback at all")
        XCTAssertEqual(openedDirectories.get(), listed, "the directory was not listed again")
        watcher.invalidate()
    }

    func testOnlyDirectoriesThatChangedAreListedOnResume() throws {
        let openedPaths = LockedValue<[String]>([])
        var calls = SystemCalls.live
        let open = calls.openDirectory
        calls.openDirectory = { path, noFollow in
            openedPaths.update { $0.append(String(cString: path)) }
            return open(path, noFollow)
        }
        let loop = try EventLoop(system: System(calls))
        defer { loop.shutdown() }
        for index in 0..<20 { directory.mkdir("d\(index)") }
        let options = DirectoryWatcher.Options(recursive: true, backend: .inotify)
        try watch {
            try DirectoryWatcher.make(path: directory.path, options: options, delegate: $0, queue: nil, loop: loop)
        }
        waitForDelivery(watcher)
        openedPaths.set([])
        XCTAssertTrue(watcher.pause())
        let file = directory.touch("d7/file")
        waitForDelivery(watcher)
        var change = DirectoryChange(.created, file)
        change.whilePaused = true
        XCTAssertEqual(resumeAndTakeBatch(), [change])
        XCTAssertEqual(openedPaths.get(), [directory.url("d7")], "one listing, of the directory that changed")
        watcher.invalidate()
    }

    func testATreeMadeWhilePausedIsReportedWithItsEntries() throws {
        try treeMadeWhilePausedIsReportedWithItsEntries(backend: .inotify)
    }

    func testATreeMadeWhilePausedIsReportedWithItsEntriesThroughFanotify() throws {
        try treeMadeWhilePausedIsReportedWithItsEntries(backend: .fanotify)
    }

    private func treeMadeWhilePausedIsReportedWithItsEntries(backend: DirectoryWatcher.Backend) throws {
        try watch {
            try DirectoryWatcher.watchFolder(
                path: directory.path, options: .init(recursive: true, backend: backend), delegate: $0)
        }
        XCTAssertTrue(watcher.pause())
        directory.mkdir("a")
        directory.mkdir("a/b")
        let file = directory.touch("a/b/file")
        let batch = resumeAndTakeBatch()
        XCTAssertEqual(
            Set(batch.map { "\($0.kind) \($0.path)" }),
            ["created \(directory.url("a"))", "created \(directory.url("a/b"))", "created \(file)"])
        XCTAssertTrue(batch.allSatisfy(\.whilePaused))
        // The new directories are watched.
        let deeper = directory.touch("a/b/deeper")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, deeper)])
    }

    func testABatchOnItsWayWhenPausedComesFirstOnResume() throws {
        let release = DispatchSemaphore(value: 0)
        let blocked = expectation(description: "blocked")
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
        recorder.onFirstBatch { _, _ in
            blocked.fulfill()
            release.wait()
        }
        // A watcher of the same directory: its barrier completes once the loop has routed every
        // event before it, so the second file's batch is handed over behind the blocked one.
        let probe = try DirectoryWatcher.watchFolder(path: directory.path) { _ in }
        defer { probe.invalidate() }
        let first = directory.touch("first")
        wait(for: [blocked], timeout: 10)
        let second = directory.touch("second")
        waitForDelivery(probe)
        XCTAssertTrue(watcher.pause())
        release.signal()
        XCTAssertEqual(delivered(), [DirectoryChange(.created, first)], "the second batch is held while paused")
        XCTAssertEqual(resumeAndTakeBatch(), [DirectoryChange(.created, second)])
    }

    /// Paused while its backlog had overflowed (a blocked callback, a backlog of 8), resumed,
    /// and overflowing again before the callback returns: every file is reported, the ones made
    /// after the resume too. (The catch-up the pause took over must not leave the watcher
    /// marked as overflowing, which would drop its later changes for good.)
    func testAPauseWhileTheBacklogOverflowedLosesNothing() throws {
        let release = DispatchSemaphore(value: 0)
        let blocked = expectation(description: "blocked")
        try watch {
            try DirectoryWatcher.make(
                path: directory.path, delegate: $0, queue: nil, backlog: DirectoryWatcher.Backlog(limit: 8))
        }
        recorder.onFirstBatch { _, _ in
            blocked.fulfill()
            release.wait()
        }
        let probe = try DirectoryWatcher.watchFolder(path: directory.path) { _ in }
        defer { probe.invalidate() }
        var made = [directory.touch("first")]
        wait(for: [blocked], timeout: 10)
        made += (0..<20).map { directory.touch("early-\($0)") }
        waitForDelivery(probe)
        XCTAssertTrue(watcher.pause())
        XCTAssertTrue(watcher.resume())
        made += (0..<20).map { directory.touch("late-\($0)") }
        waitForDelivery(probe)
        release.signal()
        waitForDelivery(watcher)
        waitForDelivery(watcher)
        let reported = Set(recorder.changes.filter { $0.kind == .created }.map(\.path))
        XCTAssertEqual(reported, Set(made.map { FileSystemPath($0) }), "every file, the late ones too")
        // And then as before.
        recorder.reset()
        let after = directory.touch("after")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, after)])
    }

    func testTheDirectoryRemovedWhilePausedIsToldAtOnce() throws {
        let path = directory.mkdir("goes")
        try watch { try DirectoryWatcher.watchFolder(path: path, delegate: $0) }
        XCTAssertTrue(watcher.pause())
        XCTAssertEqual(rmdir(path), 0)
        XCTAssertEqual(delivered(), [DirectoryChange(.rootRemoved, path, directory: true)])
        XCTAssertFalse(watcher.isMonitoring)
        XCTAssertFalse(watcher.isPaused, "the pause ended with the watch")
        XCTAssertFalse(watcher.resume())
    }

    func testAWatcherWithoutSnapshotsIsToldToListAgain() throws {
        try watch {
            try DirectoryWatcher.watchFolder(path: directory.path, options: .init(recovery: .notice), delegate: $0)
        }
        XCTAssertTrue(watcher.pause())
        directory.touch("new")
        XCTAssertEqual(resumeAndTakeBatch(), [DirectoryChange(.overflow, directory.path, directory: true)])
        XCTAssertTrue(watcher.pause())
        XCTAssertEqual(resumeAndTakeBatch(), [], "nothing changed: nothing to list")
    }

    func testAFileWatchResumesWithItsFilesChangesOnly() throws {
        let file = directory.touch("config")
        try watch { try DirectoryWatcher.watchFile(path: file, delegate: $0) }
        XCTAssertTrue(watcher.pause())
        directory.touch("sibling")
        directory.write("config", "changed")
        var change = DirectoryChange(.modified, file)
        change.whilePaused = true
        XCTAssertEqual(resumeAndTakeBatch(), [change])
    }

    func testPauseAndResumeFromInsideACallback() throws {
        let resumed = expectation(description: "resumed")
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
        recorder.onBatch = { watcher, changes in
            if changes.contains(where: { $0.path.description.hasSuffix("/pause") }) {
                XCTAssertTrue(watcher.pause())
            }
            if changes.contains(where: \.whilePaused) { resumed.fulfill() }
        }
        directory.touch("pause")
        waitForDelivery(watcher)
        XCTAssertTrue(watcher.isPaused)
        let made = directory.touch("made-while-paused")
        waitForDelivery(watcher)
        XCTAssertTrue(watcher.resume())
        wait(for: [resumed], timeout: 10)
        XCTAssertEqual(recorder.changes.last?.path, FileSystemPath(made))
    }

    func testStoppingEndsAPause() throws {
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
        XCTAssertTrue(watcher.pause())
        directory.touch("dropped")
        XCTAssertTrue(watcher.stopMonitoring())
        XCTAssertFalse(watcher.isPaused)
        XCTAssertTrue(try watcher.startMonitoring())
        let file = directory.touch("after")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, file)], "what the pause held is gone with it")
    }

    func testAPausedWatcherIsNotPausedBeforeItStarts() throws {
        let unstarted = try DirectoryWatcher(path: directory.path) { _ in }
        XCTAssertFalse(unstarted.pause())
        XCTAssertFalse(unstarted.resume())
        unstarted.invalidate()
    }
}
