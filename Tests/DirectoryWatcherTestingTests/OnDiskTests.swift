import DirectoryWatcher
import Foundation
import XCTest

@testable import DirectoryWatcherTesting

/// The kit's on-disk helpers: the fixture, the changes between two barriers, a wait for a
/// condition, and an overflow made on cue.
final class OnDiskTests: XCTestCase {
    func testTheFixtureIsRemovedWithEverythingInIt() throws {
        var folder: TemporaryDirectory? = try TemporaryDirectory()
        let path = folder!.path
        try folder!.createDirectory("a/b")
        try folder!.write("a/b/c.txt", "x")
        XCTAssertTrue(folder!.exists("a/b/c.txt"))
        folder = nil
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
    }

    func testAFixtureErrorNamesThePathAndTheCause() throws {
        let folder = try TemporaryDirectory()
        XCTAssertThrowsError(try folder.write("missing/a.txt", "x")) { error in
            XCTAssertEqual(
                "\(error)", "\(folder.path)/missing/a.txt could not be opened: No such file or directory")
        }
    }

    func testTheChangesDuringABlockAreThoseItMadeAndNoEarlierOnes() async throws {
        let folder = try TemporaryDirectory()
        let watcher = try DirectoryWatcher.watchFolder(path: folder.path) { _ in }
        defer { watcher.invalidate() }
        try folder.createFile("before.txt")
        let changes = try await watcher.changes {
            try folder.createFile("a.txt")
            try folder.rename("a.txt", to: "b.txt")
        }
        assertChanges(changes, [.created("a.txt"), .renamed("a.txt", to: "b.txt")], under: watcher)
    }

    func testAWaitReturnsOnceItsConditionHolds() async throws {
        let folder = try TemporaryDirectory()
        let watcher = try DirectoryWatcher.watchFolder(path: folder.path) { _ in }
        defer { watcher.invalidate() }
        let log = ChangeLog(watching: watcher)
        try folder.write("report.txt", "done")
        let seen = await log.wait(until: { changes in
            changes.contains { $0.path.lastComponent.description == "report.txt" }
        })
        assertChanges(seen, contain: [.created("report.txt")], under: folder.path)
    }

    func testAnOverflowOnDiskIsRecoveredWithWhatWasLost() async throws {
        let folder = try TemporaryDirectory()
        try folder.createFile("old.txt")
        let watcher = try DirectoryWatcher.watchFolder(path: folder.path) { _ in }
        defer { watcher.invalidate() }
        let changes = try await watcher.changes {
            try watcher.overflowQueue {
                try folder.createFile("new.txt")
                try folder.remove("old.txt")
            }
        }
        assertChanges(
            changes, [.overflow, .removed("old.txt", foundByRescan: true), .created("new.txt", foundByRescan: true)],
            under: watcher)
    }

    func testTheComparisonShowsWhatIsMissingAndWhatWasNotExpected() {
        let root = "/inbox"
        let changes = [
            DirectoryChange(kind: .created, path: "/inbox/a.txt", isDirectory: false),
            DirectoryChange(kind: .modified, path: "/inbox/a.txt", isDirectory: false),
            DirectoryChange(kind: .removed, path: "/inbox/b.txt", isDirectory: false, foundByRescan: true),
        ]
        XCTAssertEqual(
            failureText(changes, [.created("a.txt"), .renamed("a.txt", to: "c.txt"), .removed("b.txt")], root),
            """
            the changes under /inbox differ from those expected:
                created a.txt
              - renamed a.txt -> c.txt    (expected, not delivered)
              + modified a.txt    (delivered, not expected)
                removed b.txt (found by rescan)
            """)
        XCTAssertNil(failureText(changes, [.created("a.txt"), .modified("a.txt"), .removed("/inbox/b.txt")], root))
    }
}

/// The text a failed comparison prints, or nil when they match.
private func failureText(_ changes: [DirectoryChange], _ expected: [ExpectedChange], _ root: String) -> String? {
    let comparison = ChangeComparison(changes, expected, under: root)
    return comparison.matches ? nil : comparison.text
}
