import XCTest

/// ``TreeTests`` with the kernel's own overflows: the queue filled past
/// `fs.inotify.max_queued_events` while the loop is stalled.
final class TreeStressTests: TreeTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    /// Behind a queue filled past its limit.
    override func testDirectoriesMadeWhileEventsWereLostAreFoundWatchedAndReported() throws {
        try super.testDirectoriesMadeWhileEventsWereLostAreFoundWatchedAndReported()
    }
}
