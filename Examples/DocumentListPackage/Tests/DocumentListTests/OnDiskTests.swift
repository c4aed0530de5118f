import DirectoryWatcher
import DirectoryWatcherTesting
import DocumentList
import XCTest

/// The document list against the real kernel, in a temporary folder: each test waits for the
/// watcher (a barrier, or the changes between two), never for time.
final class OnDiskTests: XCTestCase {
    private var folder: TemporaryDirectory!

    override func setUpWithError() throws {
        folder = try TemporaryDirectory()
    }

    override func tearDown() {
        folder = nil  // removed, with everything in it
    }

    func testANewFileIsListed() async throws {
        let list = try DocumentList(folder: folder.path)
        try folder.createFile("report.txt")
        await list.folderWatcher?.barrier()
        XCTAssertEqual(list.names, ["report.txt"])
    }

    func testARenamedFileIsListedByItsNewName() async throws {
        try folder.createFile("draft.txt")
        let list = try DocumentList(folder: folder.path, names: ["draft.txt"])
        let watcher = try XCTUnwrap(list.folderWatcher)
        let changes = try await watcher.changes { try folder.rename("draft.txt", to: "final.txt") }
        assertChanges(changes, [.renamed("draft.txt", to: "final.txt")], under: watcher)
        XCTAssertEqual(list.names, ["final.txt"])
    }

    func testAnOverflowLosesNoDocument() async throws {
        try folder.createFile("old.txt")
        let list = try DocumentList(folder: folder.path, names: ["old.txt"])
        let watcher = try XCTUnwrap(list.folderWatcher)
        let changes = try await watcher.changes {
            try watcher.overflowQueue {
                try folder.createFile("new.txt")
                try folder.remove("old.txt")
            }
        }
        assertChanges(
            changes, [.overflow, .removed("old.txt", foundByRescan: true), .created("new.txt", foundByRescan: true)],
            under: watcher)
        XCTAssertEqual(list.names, ["new.txt"])
    }

    func testRemovingTheFolderEmptiesTheList() async throws {
        try folder.createDirectory("documents")
        try folder.createFile("documents/a.txt")
        let list = try DocumentList(folder: folder.path("documents"), names: ["a.txt"])
        let watcher = try XCTUnwrap(list.folderWatcher)
        let changes = try await watcher.changes { try folder.remove("documents") }
        assertChanges(changes, [.removed("a.txt"), .rootRemoved], under: watcher)
        XCTAssertTrue(list.folderIsGone)
        XCTAssertEqual(list.names, [])
        XCTAssertFalse(watcher.isMonitoring)
    }

    func testAFolderThatCannotBeWatchedIsAnErrorNamingIt() throws {
        XCTAssertThrowsError(try DocumentList(folder: folder.path("missing"))) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .noSuchPath)
            XCTAssertEqual((error as? DirectoryWatcherError)?.path.description, folder.path("missing"))
        }
        try folder.createFile("a file")
        XCTAssertThrowsError(try DocumentList(folder: folder.path("a file"))) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .notADirectory)
        }
    }
}
