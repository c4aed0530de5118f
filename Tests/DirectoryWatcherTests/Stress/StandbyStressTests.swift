import XCTest

/// ``StandbyTests`` at full size: 20,000 changes beside a blocked callback, a thousand slow
/// delegates, and backlogs that overflow the real limit of 16,384 changes.
final class StandbyStressTests: StandbyTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    /// 20,000 changes.
    override func testABlockedCallbackDoesNotStopTheChangesElsewhere() throws {
        try super.testABlockedCallbackDoesNotStopTheChangesElsewhere()
    }

    /// A thousand delegates.
    override func testManySlowDelegatesShareTwoThreadsPlusOnePerStalledCallback() throws {
        try super.testManySlowDelegatesShareTwoThreadsPlusOnePerStalledCallback()
    }

    /// The real backlog limit.
    override func testABlockedCallbacksBacklogEndsInOneOverflowInsteadOfGrowing() throws {
        try super.testABlockedCallbacksBacklogEndsInOneOverflowInsteadOfGrowing()
    }

    /// The real backlog limit.
    override func testAfterABlockedCallbacksBacklogOverflowedItCatchesUpExactly() throws {
        try super.testAfterABlockedCallbacksBacklogOverflowedItCatchesUpExactly()
    }
}
