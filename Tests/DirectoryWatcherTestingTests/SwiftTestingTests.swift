import DirectoryWatcher
import DirectoryWatcherTesting
import Testing

/// The kit's helpers from Swift Testing: the same calls, failures recorded as the running test's
/// issues.
@Suite struct SwiftTestingTests {
    @Test func aSimulatedCreationIsDelivered() async throws {
        let files = SimulatedFileSystem()
        files.createDirectory("/inbox")
        let watcher = try files.watchFolder(path: "/inbox") { _ in }
        let changes = await watcher.changes { files.createFile("/inbox/a.txt") }
        #expect(assertChanges(changes, [.created("a.txt")], under: watcher))
        watcher.invalidate()
    }

    @Test func aMismatchIsAnIssueOfTheRunningTest() async throws {
        let folder = try TemporaryDirectory()
        let watcher = try DirectoryWatcher.watchFolder(path: folder.path) { _ in }
        defer { watcher.invalidate() }
        let changes = try await watcher.changes { try folder.createFile("a.txt") }
        withKnownIssue("the comparison fails, and says so here") {
            assertChanges(changes, [.removed("a.txt")], under: watcher)
        } matching: { issue in
            issue.comments.contains {
                $0.rawValue.contains("- removed a.txt") && $0.rawValue.contains("+ created a.txt")
            }
        }
    }
}
