import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Saved states through the API, on disk: what changed while nothing watched is reported once,
/// marked, and live changes follow with none missing or repeated.
class SavedStateTestCase: WatchedDirectoryTestCase {
    /// The folder the state files go in (outside the watched directory).
    var stateFolder: TemporaryDirectory!
    var statePath: String { stateFolder.url("watch.state") }
    var recursive: Bool { false }
    var backend: DirectoryWatcher.Backend { .inotify }

    override func setUpWithError() throws {
        try super.setUpWithError()
        stateFolder = TemporaryDirectory()
    }

    override func tearDown() {
        super.tearDown()
        stateFolder = nil  // XCTest keeps each test case to the end of the run
    }

    func options(_ whenUnusable: DirectoryWatcher.SavedState.WhenUnusable = .refuse) -> DirectoryWatcher.Options {
        DirectoryWatcher.Options(
            recursive: recursive, backend: backend,
            savedState: DirectoryWatcher.SavedState(path: statePath, whenUnusable: whenUnusable))
    }

    /// Starts watching with the state; returns the first batch, what changed while stopped (none
    /// when nothing did: the barrier says so).
    @discardableResult
    func start(_ options: DirectoryWatcher.Options? = nil) throws -> [DirectoryChange] {
        try watch {
            try DirectoryWatcher.watchFolder(path: directory.path, options: options ?? self.options(), delegate: $0)
        }
        return delivered()
    }

    /// Returns once the file system's clock (a tick of a few milliseconds) has moved past now:
    /// files changed before are then older than any state saved after. What a tree knows of an
    /// entry from events alone is compared by time, and a change in the tick of a save counts
    /// as news (reported again, never missed); the tests that expect each change exactly once
    /// let the changes before a save age past its tick. A wait on a clock, not a sleep.
    func letTheFileClockTick() {
        let now = System.coarseWallClockNow()
        while !System.coarseWallClockNow().isAfter(now) { sched_yield() }
    }

    func stop() {
        watcher.invalidate()
        watcher = nil
    }

    func stopped(_ kind: DirectoryChange.Kind, _ path: String, from old: String? = nil, directory: Bool = false)
        -> DirectoryChange
    {
        var change = DirectoryChange(kind, path, from: old, directory: directory)
        change.whileStopped = true
        return change
    }

    /// Writes `text` over the start of the file: the same size when `text` is as long as it was.
    func overwrite(_ name: String, _ text: String) {
        let fd = open(directory.url(name), O_WRONLY | O_CREAT, 0o644)
        precondition(fd >= 0)
        var bytes = Array(text.utf8)
        precondition(pwrite(fd, &bytes, bytes.count, 0) == bytes.count)
        close(fd)
    }
}

/// What changed while nothing watched, one directory.
class SavedStateTests: SavedStateTestCase {
    func testWithNoStateFileNothingIsReportedAndTheFirstStateIsSaved() throws {
        directory.touch("there-before")
        XCTAssertEqual(try start(), [])
        XCTAssertTrue(FileManager.default.fileExists(atPath: statePath), "saved at the start")
        let later = directory.touch("later")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, later)])
    }

    func testChangesMadeWhileStoppedAreReportedOnceThenLiveChangesFollow() throws {
        directory.touch("removed")
        directory.touch("renamed")
        overwrite("rewritten", "abc")
        directory.touch("replaced")
        directory.touch("replacing")
        directory.touch("untouched")
        try start()
        letTheFileClockTick()
        stop()

        let created = directory.touch("created")
        XCTAssertEqual(unlink(directory.url("removed")), 0)
        XCTAssertEqual(rename(directory.url("renamed"), directory.url("renamed-to")), 0)
        overwrite("rewritten", "xyz")
        XCTAssertEqual(rename(directory.url("replacing"), directory.url("replaced")), 0)
        let batch = try start()
        XCTAssertEqual(
            Set(batch),
            [
                stopped(.created, created),
                stopped(.removed, directory.url("removed")),
                stopped(.renamed, directory.url("renamed-to"), from: directory.url("renamed")),
                stopped(.modified, directory.url("rewritten")),
                stopped(.renamed, directory.url("replaced"), from: directory.url("replacing")),
            ])
        XCTAssertEqual(batch.count, 5, "each once: \(batch)")

        let live = directory.touch("live")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, live)], "live, and nothing again")
        stop()
        XCTAssertEqual(try start(), [], "nothing changed since the last stop")
    }
}

/// A directory compared with a state whose decoding is held back until the listing has begun:
/// the entries listed before the state is there are kept aside and compared once it is.
final class SavedStateDecodedLateTests: SavedStateTestCase {
    func testADirectoryListedBeforeItsStateIsDecodedGetsEachChangeOnce() throws {
        let count = 300
        for index in 0..<count { directory.touch("entry-\(index)") }
        overwrite("entry-30", "abc")
        try start()
        letTheFileClockTick()
        XCTAssertTrue(watcher.stopMonitoring())

        XCTAssertEqual(unlink(directory.url("entry-10")), 0)
        XCTAssertEqual(rename(directory.url("entry-20"), directory.url("renamed")), 0)
        overwrite("entry-30", "abcdef")
        XCTAssertEqual(rename(directory.url("entry-40"), directory.url("entry-41")), 0)
        let created = directory.touch("created")
        watcher.stateStore?.decodingWaitsForAsks = 2
        XCTAssertTrue(try watcher.startMonitoring())
        let batch = delivered()
        XCTAssertEqual(
            Set(batch),
            [
                stopped(.removed, directory.url("entry-10")),
                stopped(.renamed, directory.url("renamed"), from: directory.url("entry-20")),
                stopped(.modified, directory.url("entry-30")),
                stopped(.renamed, directory.url("entry-41"), from: directory.url("entry-40")),
                stopped(.created, created),
            ])
        XCTAssertEqual(batch.count, 5, "each once: \(batch)")
        let live = directory.touch("live")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, live)], "live, and nothing again")
        stop()
        XCTAssertEqual(try start(), [], "nothing changed since the last stop")
    }
}

/// The same through a state file that cannot be used, or written.
final class SavedStateFileTests: SavedStateTestCase {
    /// Saves a state, then makes `damage` of its bytes; the file must then be refused, naming
    /// itself and `cause`, and left as it is.
    private func assertRefused(
        _ damage: (inout [UInt8]) -> Void, cause: String, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        directory.touch("a")
        try start()
        stop()
        var bytes = try XCTUnwrap(FileManager.default.contents(atPath: statePath)).map { $0 }
        damage(&bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: statePath))
        XCTAssertThrowsError(try start(), file: file, line: line) { error in
            guard let error = error as? DirectoryWatcherError else {
                return XCTFail("\(error)", file: file, line: line)
            }
            XCTAssertEqual(error.code, .savedStateUnusable, file: file, line: line)
            XCTAssertEqual(error.path, FileSystemPath(statePath), file: file, line: line)
            XCTAssertTrue(error.description.contains(statePath), error.description, file: file, line: line)
            XCTAssertTrue(error.description.contains(cause), error.description, file: file, line: line)
        }
        XCTAssertEqual(FileManager.default.contents(atPath: statePath).map(Array.init), bytes, "left as it was")
    }

    func testACorruptStateIsRefused() throws {
        try assertRefused({ $0[$0.count / 2] ^= 0x40 }, cause: "corrupt")
    }

    func testATruncatedStateIsRefused() throws {
        try assertRefused({ $0.removeLast(7) }, cause: "truncated")
    }

    func testAnotherFilesBytesAreRefused() throws {
        try assertRefused({ $0 = Array("not a state at all\n".utf8) }, cause: "not a saved state")
    }

    func testAnotherVersionIsRefused() throws {
        try assertRefused({ $0[8] = 9 }, cause: "format version 9")
    }

    func testAnotherDirectorysStateIsRefused() throws {
        let other = TemporaryDirectory()
        let state = DirectoryWatcher.SavedState(path: statePath)
        let elsewhere = try DirectoryWatcher.watchFolder(path: other.path, options: .init(savedState: state)) { _ in }
        elsewhere.invalidate()
        XCTAssertThrowsError(try start()) { error in
            let error = error as? DirectoryWatcherError
            XCTAssertEqual(error?.code, .savedStateUnusable)
            XCTAssertTrue(
                error?.description.contains("the state of another directory, \(other.path)") ?? false,
                "\(String(describing: error))")
        }
    }

    func testAnUnusableStateCanBeReplacedWithOneNoticeAndEverythingAsNew() throws {
        let a = directory.touch("a")
        let sub = directory.mkdir("sub")
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: statePath))
        let batch = try start(options(.startFresh))
        XCTAssertEqual(batch.first?.kind, .failed)
        XCTAssertEqual(batch.first?.path, FileSystemPath(statePath))
        XCTAssertEqual(batch.first?.error?.code, .savedStateUnusable)
        XCTAssertEqual(batch.filter { $0.kind == .failed }.count, 1, "one notice: \(batch)")
        XCTAssertEqual(Set(batch.dropFirst()), [stopped(.created, a), stopped(.created, sub, directory: true)])
        // Replaced once that batch was delivered: the next start reports nothing.
        stop()
        XCTAssertEqual(try start(), [])
    }

    /// Saves a state of one entry, then gives its first entry an unknown kind and the file a
    /// checksum that matches: a body the writer got wrong, which only its decoding finds (that
    /// runs while the start lists the directory).
    private func saveStateWithAMalformedBody() throws -> [UInt8] {
        directory.touch("a")
        try start()
        stop()
        var bytes = try XCTUnwrap(FileManager.default.contents(atPath: statePath)).map { $0 }
        var index = 12
        func varint() -> Int {
            var value = 0
            var shift = 0
            while true {
                let byte = bytes[index]
                index += 1
                value |= Int(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
        }
        index += varint()  // the root
        XCTAssertEqual(varint(), 1, "one directory")
        XCTAssertEqual(varint(), 0, "the root's own path")
        index += 8  // its inode
        XCTAssertEqual(varint(), 1, "one entry")
        XCTAssertEqual(bytes[index], 0, "a status read by statx")
        bytes[index] = 7
        bytes.removeLast(4)
        withUnsafeBytes(of: CRC32C.checksum(bytes[...]).littleEndian) { bytes.append(contentsOf: $0) }
        try Data(bytes).write(to: URL(fileURLWithPath: statePath))
        return bytes
    }

    func testABodyThatPassesTheChecksumButDoesNotParseIsRefusedReportingNothing() throws {
        let bytes = try saveStateWithAMalformedBody()
        directory.touch("b")
        let seen = LockedChanges()
        XCTAssertThrowsError(
            try DirectoryWatcher.watchFolder(path: directory.path, options: options()) { seen.append($0) }
        ) { error in
            let error = error as? DirectoryWatcherError
            XCTAssertEqual(error?.code, .savedStateUnusable)
            XCTAssertEqual(error?.path, FileSystemPath(statePath))
            XCTAssertTrue(error?.description.contains("unknown kind 7") ?? false, "\(String(describing: error))")
        }
        XCTAssertEqual(seen.all, [], "a refused start reports nothing")
        XCTAssertEqual(FileManager.default.contents(atPath: statePath).map(Array.init), bytes, "left as it was")
    }

    func testABodyThatPassesTheChecksumButDoesNotParseCanBeReplacedWithANotice() throws {
        _ = try saveStateWithAMalformedBody()
        let b = directory.touch("b")
        let batch = try start(options(.startFresh))
        XCTAssertEqual(batch.first?.kind, .failed, "the notice first: \(batch)")
        XCTAssertEqual(batch.first?.path, FileSystemPath(statePath))
        XCTAssertTrue(batch.first?.error?.description.contains("unknown kind 7") ?? false, "\(batch)")
        XCTAssertEqual(Set(batch.dropFirst()), [stopped(.created, directory.url("a")), stopped(.created, b)])
        stop()
        XCTAssertEqual(try start(), [], "replaced once that batch was delivered")
    }

    func testAStateThatCannotBeWrittenFailsTheStartAndNamesTheFile() throws {
        let missing = stateFolder.url("no-such-folder/watch.state")
        let options = DirectoryWatcher.Options(savedState: .init(path: missing))
        XCTAssertThrowsError(try DirectoryWatcher.watchFolder(path: directory.path, options: options) { _ in }) {
            error in
            let error = error as? DirectoryWatcherError
            XCTAssertEqual(error?.code, .savedStateNotWritten)
            XCTAssertEqual(error?.errno, ENOENT)
            XCTAssertTrue(
                error?.description.hasPrefix("cannot save the state to \"\(missing)\"") ?? false,
                "\(String(describing: error))")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing))
    }

    func testAFailedSaveLeavesThePreviousStateIntact() throws {
        try start()
        let before = try XCTUnwrap(FileManager.default.contents(atPath: statePath))
        watcher.stateStore?.writeFile = { _, _ throws(SyscallError) in
            throw SyscallError(function: "write", errno: ENOSPC)
        }
        directory.touch("new")
        XCTAssertEqual(delivered().count, 1)
        XCTAssertThrowsError(try watcher.saveState()) { error in
            let error = error as? DirectoryWatcherError
            XCTAssertEqual(error?.code, .savedStateNotWritten)
            XCTAssertEqual(error?.errno, ENOSPC)
            XCTAssertTrue(
                error?.description.contains("No space left on device") ?? false, "\(String(describing: error))")
        }
        XCTAssertEqual(FileManager.default.contents(atPath: statePath), before, "the old state stays")
        watcher.stateStore?.writeFile = nil
        stop()
        // The old state stood, then the stop saved: nothing again.
        XCTAssertEqual(try start(), [])
    }

    func testSavingInsideACallbackDoesNotWaitAndCountsThatBatchAsHandled() throws {
        try start()
        let saved = expectation(description: "saved from the callback")
        recorder.onFirstBatch { watcher, _ in
            do { try watcher.saveState() } catch { XCTFail("\(error)") }
            saved.fulfill()
        }
        // The write, on a Dispatch worker once the callback has returned, holds the new entry.
        let written = expectation(description: "a state written with the entry")
        let store = try XCTUnwrap(watcher.stateStore)
        store.writeFile = { path, bytes throws(SyscallError) in
            try System().replaceFile(path, with: bytes)
            if bytes.firstRange(of: Array("handled".utf8)) != nil { written.fulfill() }
        }
        let handled = directory.touch("handled")
        wait(for: [saved, written], timeout: 10)
        XCTAssertEqual(delivered(), [DirectoryChange(.created, handled)])
        store.writeFile = nil
        // As if killed now: the state from the callback stands, with that batch handled.
        let copy = stateFolder.url("copy.state")
        try FileManager.default.copyItem(atPath: statePath, toPath: copy)
        stop()
        try FileManager.default.removeItem(atPath: statePath)
        try FileManager.default.moveItem(atPath: copy, toPath: statePath)
        XCTAssertEqual(try start(), [])
    }

    func testOptionsThatCannotKeepAStateAreRefused() {
        for (options, detail) in [
            (DirectoryWatcher.Options(recovery: .notice, savedState: .init(path: statePath)), "Recovery.exact"),
            (DirectoryWatcher.Options(backend: .polling, savedState: .init(path: statePath)), "polled"),
            (DirectoryWatcher.Options(savedState: .init(path: "")), "path is empty"),
            (DirectoryWatcher.Options(savedState: .init(path: statePath, interval: .zero)), "more than zero"),
        ] {
            XCTAssertThrowsError(try DirectoryWatcher.watchFolder(path: directory.path, options: options) { _ in }) {
                error in
                let error = error as? DirectoryWatcherError
                XCTAssertEqual(error?.code, .invalidOption)
                XCTAssertTrue(error?.detail?.contains(detail) ?? false, "\(String(describing: error))")
            }
        }
    }

    func testAStateFileInsideTheWatchedDirectoryIsNotReported() throws {
        let inside = DirectoryWatcher.Options(savedState: .init(path: directory.url(".watch.state")))
        XCTAssertEqual(try start(inside), [])
        try watcher.saveState()
        let other = directory.touch("other")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, other)], "the saves' files left out")
        stop()
        XCTAssertEqual(try start(inside), [])
    }
}

/// The same in a tree: directories made with their entries, subtrees renamed and removed.
class SavedStateTreeTests: SavedStateTests {
    override var recursive: Bool { true }

    func testATreesChangesWhileStoppedAreReportedOnceThenLiveChangesFollow() throws {
        directory.mkdir("kept")
        directory.touch("kept/file")
        directory.mkdir("moved")
        directory.mkdir("moved/inner")
        directory.touch("moved/inner/file")
        directory.mkdir("gone")
        directory.mkdir("gone/inner")
        directory.touch("gone/inner/file")
        directory.touch("gone/file")
        try start()
        letTheFileClockTick()
        stop()

        let made = directory.mkdir("made")
        let madeInner = directory.mkdir("made/inner")
        let madeFile = directory.touch("made/inner/file")
        let keptNew = directory.touch("kept/new")
        XCTAssertEqual(unlink(directory.url("kept/file")), 0)
        XCTAssertEqual(rename(directory.url("moved"), directory.url("kept/moved")), 0)
        let movedNew = directory.touch("kept/moved/inner/new")
        try FileManager.default.removeItem(atPath: directory.url("gone"))
        let batch = try start()
        XCTAssertEqual(
            Set(batch),
            [
                stopped(.created, made, directory: true),
                stopped(.created, madeInner, directory: true),
                stopped(.created, madeFile),
                stopped(.created, keptNew),
                stopped(.removed, directory.url("kept/file")),
                stopped(.renamed, directory.url("kept/moved"), from: directory.url("moved"), directory: true),
                stopped(.created, movedNew),
                stopped(.removed, directory.url("gone"), directory: true),
            ])
        XCTAssertEqual(batch.count, 8, "each once: \(batch)")

        let live = directory.touch("kept/moved/inner/live")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, live)], "live in the moved subtree, nothing again")
        stop()
        XCTAssertEqual(try start(), [])
    }
}

/// The tree through fanotify's one mark.
final class SavedStateFanotifyTreeTests: SavedStateTreeTests {
    override var backend: DirectoryWatcher.Backend { .fanotify }

    // (Declared here so that the tests are found in this class.)
    override func testATreesChangesWhileStoppedAreReportedOnceThenLiveChangesFollow() throws {
        try super.testATreesChangesWhileStoppedAreReportedOnceThenLiveChangesFollow()
    }

    override func testChangesMadeWhileStoppedAreReportedOnceThenLiveChangesFollow() throws {
        try super.testChangesMadeWhileStoppedAreReportedOnceThenLiveChangesFollow()
    }

    override func testWithNoStateFileNothingIsReportedAndTheFirstStateIsSaved() throws {
        try super.testWithNoStateFileNothingIsReportedAndTheFirstStateIsSaved()
        XCTAssertEqual(watcher.backendChoice?.kind, .fanotify)
    }
}

/// Changes a closure was given, from any thread.
final class LockedChanges: @unchecked Sendable {
    private let lock = NSLock()
    private var changes: [DirectoryChange] = []

    func append(_ batch: [DirectoryChange]) { lock.withLock { changes += batch } }
    var all: [DirectoryChange] { lock.withLock { changes } }
}
