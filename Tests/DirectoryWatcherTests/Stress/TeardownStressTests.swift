import XCTest

/// ``TeardownTests`` at full size: 1,000 loops started and stopped while the app opens files, 300
/// loops torn down under barriers.
final class TeardownStressTests: TeardownTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    /// 1,000 cycles.
    override func testCyclesWhileTheAppOpensFilesNeverWriteIntoThem() throws {
        try super.testCyclesWhileTheAppOpensFilesNeverWriteIntoThem()
    }

    /// 300 loops.
    override func testNoCallReachesADescriptorAfterTheLoopClosedIt() throws {
        try super.testNoCallReachesADescriptorAfterTheLoopClosedIt()
    }
}
