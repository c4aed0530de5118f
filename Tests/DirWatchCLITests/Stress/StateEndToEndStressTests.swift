import XCTest

/// Fifty kills and more: `DIRWATCH_STRESS=1`.
final class StateEndToEndStressTests: StateEndToEndTests {
    override var kills: Int { 60 }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    override func testSIGKILLAtRandomPointsLosesNothing() throws {
        try super.testSIGKILLAtRandomPointsLosesNothing()
    }
}
