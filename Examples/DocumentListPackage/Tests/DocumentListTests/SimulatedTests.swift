import DirectoryWatcher
import DirectoryWatcherTesting
import DocumentList
import XCTest

/// The document list against a simulated kernel: the same watcher and delivery as on disk, with
/// what the disk rarely does on cue made to happen: an overflow, a refused watch.
final class SimulatedTests: XCTestCase {
    private var files: SimulatedFileSystem!

    override func setUp() {
        files = SimulatedFileSystem()
        files.createDirectory("/documents")
    }

    override func tearDown() {
        files = nil
    }

    /// The list, watching through the simulation.
    private func makeList(names: [String] = []) throws -> DocumentList {
        try DocumentList(folder: "/documents", names: names) { [files] path, delegate in
            try files!.watchFolder(path: path, delegate: delegate)
        }
    }

    func testANewFileIsListed() async throws {
        let list = try makeList()
        files.createFile("/documents/report.txt")
        await files.waitUntilDelivered()
        XCTAssertEqual(list.names, ["report.txt"])
    }

    func testARenamedFileIsListedByItsNewName() async throws {
        files.createFile("/documents/draft.txt")
        let list = try makeList(names: ["draft.txt"])
        let watcher = try XCTUnwrap(list.folderWatcher)
        let changes = await watcher.changes { files.rename("/documents/draft.txt", to: "/documents/final.txt") }
        assertChanges(changes, [.renamed("draft.txt", to: "final.txt")], under: watcher)
        XCTAssertEqual(list.names, ["final.txt"])
    }

    func testAnOverflowLosesNoDocument() async throws {
        files.createFile("/documents/old.txt")
        let list = try makeList(names: ["old.txt"])
        let watcher = try XCTUnwrap(list.folderWatcher)
        let changes = await watcher.changes {
            files.losingEvents {
                files.createFile("/documents/new.txt")
                files.remove("/documents/old.txt")
            }
        }
        assertChanges(
            changes, [.overflow, .removed("old.txt", foundByRescan: true), .created("new.txt", foundByRescan: true)],
            under: watcher)
        XCTAssertEqual(list.names, ["new.txt"])
    }

    func testRemovingTheFolderEmptiesTheList() async throws {
        files.createFile("/documents/a.txt")
        let list = try makeList(names: ["a.txt"])
        let watcher = try XCTUnwrap(list.folderWatcher)
        let changes = await watcher.changes { files.remove("/documents") }
        assertChanges(changes, [.removed("a.txt"), .rootRemoved], under: watcher)
        XCTAssertTrue(list.folderIsGone)
        XCTAssertEqual(list.names, [])
    }

    func testAFolderThatCannotBeWatchedIsAnErrorNamingIt() throws {
        for code: DirectoryWatcherError.Code in [.permissionDenied, .watchLimitReached] {
            files.refuseWatches(of: "/documents", with: code)
            XCTAssertThrowsError(try makeList()) { error in
                XCTAssertEqual((error as? DirectoryWatcherError)?.code, code)
                XCTAssertEqual((error as? DirectoryWatcherError)?.path.description, "/documents")
            }
        }
    }
}
