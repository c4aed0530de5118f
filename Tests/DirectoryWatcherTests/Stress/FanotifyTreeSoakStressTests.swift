import XCTest

/// ``FanotifyTreeSoakTests`` at 20 seeds.
final class FanotifyTreeSoakStressTests: FanotifyTreeSoakTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    override func testChurnInATreeReconcilesWithTheDisk() throws {
        try super.testChurnInATreeReconcilesWithTheDisk()
    }
}
