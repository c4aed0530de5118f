import DirectoryWatcher
import DirectoryWatcherTesting
import DocumentList
import Testing

/// The same kit from Swift Testing: a failed assertion is an issue of the running test.
@Suite struct DocumentListSwiftTestingTests {
    @Test func aNewFileIsListedOnDisk() async throws {
        let folder = try TemporaryDirectory()
        let list = try DocumentList(folder: folder.path)
        let watcher = try #require(list.folderWatcher)
        let changes = try await watcher.changes { try folder.createFile("report.txt") }
        #expect(assertChanges(changes, [.created("report.txt")], under: watcher))
        #expect(list.names == ["report.txt"])
    }

    @Test func anOverflowInTheSimulationLosesNoDocument() async throws {
        let files = SimulatedFileSystem()
        files.createDirectory("/documents")
        let list = try DocumentList(folder: "/documents") { path, delegate in
            try files.watchFolder(path: path, delegate: delegate)
        }
        files.losingEvents { files.createFile("/documents/new.txt") }
        await files.waitUntilDelivered()
        #expect(list.names == ["new.txt"])
    }
}
