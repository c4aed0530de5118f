import XCTest

/// ``TreeSoakTests`` at 20 seeds, each overflow made by filling the kernel queue past
/// `fs.inotify.max_queued_events` while the loop is stalled.
final class TreeSoakStressTests: TreeSoakTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    override func testChurnInATreeReconcilesWithTheDisk() throws {
        try super.testChurnInATreeReconcilesWithTheDisk()
    }
}
