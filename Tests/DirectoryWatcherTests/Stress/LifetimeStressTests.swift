import XCTest

/// ``LifetimeTests`` at full size: 2,000 and 10,000 watchers made and invalidated in a row.
final class LifetimeStressTests: LifetimeTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    /// 2,000 cycles.
    override func testCyclesLeaveDescriptorsAndThreadsWhereTheyWere() throws {
        try super.testCyclesLeaveDescriptorsAndThreadsWhereTheyWere()
    }

    /// 10,000 cycles.
    override func testCyclesWhileAnotherWatcherKeepsTheLoop() throws {
        try super.testCyclesWhileAnotherWatcherKeepsTheLoop()
    }
}
