import XCTest

/// ``FanotifyLifetimeTests`` at full size: 25 fanotify trees made and ended by each of eight threads.
final class FanotifyLifetimeStressTests: FanotifyLifetimeTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    /// 25 trees per thread.
    override func testTreesMadeAndEndedFromEightThreadsLeaveNoDescriptorOrMarkBehind() throws {
        try super.testTreesMadeAndEndedFromEightThreadsLeaveNoDescriptorOrMarkBehind()
    }
}
