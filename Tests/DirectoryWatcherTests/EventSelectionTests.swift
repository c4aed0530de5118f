import Dispatch
import Foundation
import XCTest

@testable import DirectoryWatcher

/// `DirectoryWatcher.Options`: which kinds a watcher reports, and the opt-in opens, reads and
/// closes.
final class EventSelectionTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUp() {
        directory = TemporaryDirectory()
    }

    override func tearDown() {
        directory = nil
    }

    private func watch(_ events: DirectoryWatcher.Events) throws -> (DirectoryWatcher, Recorder) {
        let recorder = Recorder()
        let watcher = try DirectoryWatcher.watchFolder(
            path: directory.path, options: DirectoryWatcher.Options(events: events), delegate: recorder)
        return (watcher, recorder)
    }

    private func read(_ path: String) {
        let fd = open(path, O_RDONLY)
        precondition(fd >= 0)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while buffer.withUnsafeMutableBytes({ Glibc.read(fd, $0.baseAddress, $0.count) }) > 0 {}
        close(fd)
    }

    func testDefaultsAreTheDirectoryWatchOfBefore() {
        XCTAssertEqual(DirectoryWatcher.Options().events, .default)
        XCTAssertEqual(DirectoryWatcher.Events.default.inotifyMask, InotifyMask.directoryWatch)
        XCTAssertTrue(DirectoryWatcher.Events.all.isSuperset(of: [.opened, .accessed, .writerClosed, .readerClosed]))
    }

    func testOnlyTheSelectedKindsAreReported() throws {
        let (watcher, recorder) = try watch([.created, .removed])
        defer { watcher.invalidate() }
        let file = directory.touch("a")
        directory.write("a", "x")
        chmod(file, 0o600)
        rename(file, directory.url("b"))
        unlink(directory.url("b"))
        waitForDelivery(watcher)
        XCTAssertEqual(
            recorder.changes, [DirectoryChange(.created, file), DirectoryChange(.removed, directory.url("b"))])
    }

    func testMovesAloneStillPairRenames() throws {
        let file = directory.touch("a")
        let (watcher, recorder) = try watch(.moved)
        defer { watcher.invalidate() }
        directory.write("a", "x")
        rename(file, directory.url("b"))
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes, [DirectoryChange(.renamed, directory.url("b"), from: file)])
    }

    func testTwoWatchersOfOneDirectoryFilterTheirOwn() throws {
        let (writes, writeRecorder) = try watch(.modified)
        defer { writes.invalidate() }
        let (everything, allRecorder) = try watch(.default)
        defer { everything.invalidate() }
        let file = directory.touch("a")
        directory.write("a", "x")
        waitForDelivery(writes)
        waitForDelivery(everything)
        XCTAssertEqual(writeRecorder.changes, [DirectoryChange(.modified, file)])
        XCTAssertEqual(allRecorder.changes, [DirectoryChange(.created, file), DirectoryChange(.modified, file)])
    }

    func testOpensReadsAndClosesAreOffByDefault() throws {
        let file = directory.touch("a")
        directory.write("a", "contents")
        let (watcher, recorder) = try watch(.default)
        defer { watcher.invalidate() }
        read(file)
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes, [])
    }

    func testReadingAFile() throws {
        let file = directory.touch("a")
        directory.write("a", "contents")
        let (watcher, recorder) = try watch(.all)
        defer { watcher.invalidate() }
        read(file)
        waitForDelivery(watcher)
        XCTAssertEqual(
            recorder.changes,
            [DirectoryChange(.opened, file), DirectoryChange(.accessed, file), DirectoryChange(.readerClosed, file)])
    }

    func testWritingAFileEndsWithWriterClosed() throws {
        let (watcher, recorder) = try watch([.created, .modified, .writerClosed])
        defer { watcher.invalidate() }
        let file = directory.touch("a")
        directory.write("a", "contents")
        waitForDelivery(watcher)
        XCTAssertEqual(
            recorder.changes,
            [
                DirectoryChange(.created, file), DirectoryChange(.writerClosed, file),
                DirectoryChange(.modified, file), DirectoryChange(.writerClosed, file),
            ])
    }

    func testListingTheWatchedDirectoryIsReportedOnItsOwnPath() throws {
        let (watcher, recorder) = try watch([.opened, .readerClosed])
        defer { watcher.invalidate() }
        _ = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        waitForDelivery(watcher)
        XCTAssertEqual(
            recorder.changes,
            [
                DirectoryChange(.opened, directory.path, directory: true),
                DirectoryChange(.readerClosed, directory.path, directory: true),
            ])
    }

    func testAFileWatchWithSelectedEvents() throws {
        let file = directory.touch("a")
        let recorder = Recorder()
        let watcher = try DirectoryWatcher.watchFile(
            path: file, options: DirectoryWatcher.Options(events: [.writerClosed]), delegate: recorder)
        defer { watcher.invalidate() }
        XCTAssertEqual(watcher.options.events, [.writerClosed])
        directory.write("a", "contents")
        directory.touch("b")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes, [DirectoryChange(.writerClosed, file)])
    }
}
