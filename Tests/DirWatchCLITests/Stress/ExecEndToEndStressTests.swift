import XCTest

/// ``ExecEndToEndTests`` with batches of 10,000 paths.
final class ExecEndToEndStressTests: ExecEndToEndTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    /// 10,000 paths.
    override func testALargeBatchReachesTheCommandInFull() throws {
        try super.testALargeBatchReachesTheCommandInFull()
    }

    /// 10,000 paths.
    override func testACommandThatNeverReadsItsStdinDoesNotHoldUpTheNextRun() throws {
        try super.testACommandThatNeverReadsItsStdinDoesNotHoldUpTheNextRun()
    }
}
