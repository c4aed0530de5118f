import XCTest

/// ``SoakTests`` with the kernel's own overflows: the queue filled past
/// `fs.inotify.max_queued_events` while the loop is stalled.
final class SoakStressTests: SoakTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    /// Each overflow made by filling the kernel queue.
    override func testRandomChangesAndOverflowsReconcileWithTheDisk() throws {
        try super.testRandomChangesAndOverflowsReconcileWithTheDisk()
    }
}
