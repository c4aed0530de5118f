import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// A change keeps its flags packed and what is almost always nil out of line: each field still
/// reads back what was set, and equal changes are equal and hash alike however they were built.
final class DirectoryChangeTests: XCTestCase {
    func testEachFieldReadsBackWhatWasSet() {
        var change = DirectoryChange(kind: .created, path: FileSystemPath("/d/f"), isDirectory: false)
        for flag in [\DirectoryChange.isDirectory, \.foundByRescan, \.whilePaused, \.whileStopped] {
            change[keyPath: flag] = true
            XCTAssertTrue(change[keyPath: flag])
            let others = [\DirectoryChange.isDirectory, \.foundByRescan, \.whilePaused, \.whileStopped]
                .filter { $0 != flag }
            XCTAssertEqual(others.map { change[keyPath: $0] }, [false, false, false], "only \(flag) set")
            change[keyPath: flag] = false
        }
        change.oldPath = FileSystemPath("/d/old")
        change.droppedChanges = 3
        let error = DirectoryWatcherError(code: .permissionDenied, path: "/d/f", errno: EACCES)
        change.error = error
        XCTAssertEqual(change.oldPath, FileSystemPath("/d/old"))
        XCTAssertEqual(change.droppedChanges, 3)
        XCTAssertEqual(change.error, error)
        change.droppedChanges = nil
        XCTAssertEqual(change.oldPath, FileSystemPath("/d/old"))
        XCTAssertEqual(change.error, error)
    }

    func testChangesBuiltEitherWayAreEqualAndHashAlike() {
        let plain = DirectoryChange(kind: .created, path: FileSystemPath("/d/f"), isDirectory: true)
        var edited = DirectoryChange(
            kind: .created, path: FileSystemPath("/d/f"), oldPath: FileSystemPath("/d/g"), isDirectory: false,
            foundByRescan: true, droppedChanges: 1)
        XCTAssertNotEqual(plain, edited)
        edited.oldPath = nil
        edited.droppedChanges = nil
        edited.foundByRescan = false
        edited.isDirectory = true
        XCTAssertEqual(plain, edited)
        XCTAssertEqual(Set([plain, edited]).count, 1)
        XCTAssertNotEqual(
            DirectoryChange(kind: .renamed, path: "/d/b", oldPath: "/d/a", isDirectory: false),
            DirectoryChange(kind: .renamed, path: "/d/b", oldPath: "/d/c", isDirectory: false))
    }

    /// Three words: passed between the router's steps in registers, not built in memory and
    /// copied (Docs/benchmarks.md counts what that saved).
    func testAChangeIsThreeWords() {
        XCTAssertLessThanOrEqual(MemoryLayout<DirectoryChange>.size, 3 * MemoryLayout<Int>.size)
    }
}
