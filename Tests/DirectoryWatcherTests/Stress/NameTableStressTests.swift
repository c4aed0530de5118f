import XCTest

/// ``NameTableTests`` at full size: five seeds of 40,000 operations, and 100,000 names.
final class NameTableStressTests: NameTableTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    /// Five seeds.
    override func testRandomOperationsMatchADictionary() {
        super.testRandomOperationsMatchADictionary()
    }

    /// 100,000 names.
    override func testGrowingToManyAndEmptyingAgain() {
        super.testGrowingToManyAndEmptyingAgain()
    }
}
