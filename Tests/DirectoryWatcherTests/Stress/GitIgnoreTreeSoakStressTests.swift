import XCTest

/// ``GitIgnoreTreeSoakTests`` at 20 seeds of 10 steps, the inotify queue filled past its limit
/// in one seed of four.
final class GitIgnoreTreeSoakStressTests: GitIgnoreTreeSoakTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    override func testChurnInATreeReconcilesWithTheDisk() throws {
        try super.testChurnInATreeReconcilesWithTheDisk()
    }
}
