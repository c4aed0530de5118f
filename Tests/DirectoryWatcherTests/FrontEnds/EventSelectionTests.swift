import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// `DirectoryWatcher.Options`: which kinds a watcher reports, and the opt-in opens, reads and
/// closes.
final class EventSelectionTests: WatchedDirectoryTestCase {
    /// Watches `directory` for `events` only: the fixture's watcher, or another one.
    private func watchFolder(events: DirectoryWatcher.Events, delegate: Recorder) throws -> DirectoryWatcher {
        try DirectoryWatcher.watchFolder(
            path: directory.path, options: DirectoryWatcher.Options(events: events), delegate: delegate)
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
        XCTAssertEqual(DirectoryWatcher.Events.default.eventMask, EventMask.directoryWatch)
        XCTAssertTrue(DirectoryWatcher.Events.all.isSuperset(of: [.opened, .accessed, .writerClosed, .readerClosed]))
    }

    func testOnlyTheSelectedKindsAreReported() throws {
        try watch { try watchFolder(events: [.created, .removed], delegate: $0) }
        let file = directory.touch("a")
        directory.write("a", "x")
        chmod(file, 0o600)
        rename(file, directory.url("b"))
        unlink(directory.url("b"))
        XCTAssertEqual(delivered(), [DirectoryChange(.created, file), DirectoryChange(.removed, directory.url("b"))])
    }

    func testMovesAloneStillPairRenames() throws {
        let file = directory.touch("a")
        try watch { try watchFolder(events: .moved, delegate: $0) }
        directory.write("a", "x")
        rename(file, directory.url("b"))
        XCTAssertEqual(delivered(), [DirectoryChange(.renamed, directory.url("b"), from: file)])
    }

    func testTwoWatchersOfOneDirectoryFilterTheirOwn() throws {
        try watch { try watchFolder(events: .modified, delegate: $0) }
        let allRecorder = Recorder()
        let everything = try watchFolder(events: .default, delegate: allRecorder)
        defer { everything.invalidate() }
        let file = directory.touch("a")
        directory.write("a", "x")
        waitForDelivery(everything)
        XCTAssertEqual(delivered(), [DirectoryChange(.modified, file)])
        XCTAssertEqual(allRecorder.changes, [DirectoryChange(.created, file), DirectoryChange(.modified, file)])
    }

    func testOpensReadsAndClosesAreOffByDefault() throws {
        let file = directory.touch("a")
        directory.write("a", "contents")
        try watch { try watchFolder(events: .default, delegate: $0) }
        read(file)
        XCTAssertEqual(delivered(), [])
    }

    func testReadingAFile() throws {
        let file = directory.touch("a")
        directory.write("a", "contents")
        try watch { try watchFolder(events: .all, delegate: $0) }
        read(file)
        XCTAssertEqual(
            delivered(),
            [DirectoryChange(.opened, file), DirectoryChange(.accessed, file), DirectoryChange(.readerClosed, file)])
    }

    func testWritingAFileEndsWithWriterClosed() throws {
        try watch { try watchFolder(events: [.created, .modified, .writerClosed], delegate: $0) }
        let file = directory.touch("a")
        directory.write("a", "contents")
        XCTAssertEqual(
            delivered(),
            [
                DirectoryChange(.created, file), DirectoryChange(.writerClosed, file),
                DirectoryChange(.modified, file), DirectoryChange(.writerClosed, file),
            ])
    }

    func testListingTheWatchedDirectoryIsReportedOnItsOwnPath() throws {
        try watch { try watchFolder(events: [.opened, .readerClosed], delegate: $0) }
        _ = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        XCTAssertEqual(
            delivered(),
            [
                DirectoryChange(.opened, directory.path, directory: true),
                DirectoryChange(.readerClosed, directory.path, directory: true),
            ])
    }

    func testAFileWatchWithSelectedEvents() throws {
        let file = directory.touch("a")
        try watch {
            try DirectoryWatcher.watchFile(
                path: file, options: DirectoryWatcher.Options(events: [.writerClosed]), delegate: $0)
        }
        XCTAssertEqual(watcher.options.events, [.writerClosed])
        directory.write("a", "contents")
        directory.touch("b")
        XCTAssertEqual(delivered(), [DirectoryChange(.writerClosed, file)])
    }
}
