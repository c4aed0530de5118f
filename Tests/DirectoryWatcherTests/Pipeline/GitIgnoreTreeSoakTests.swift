import XCTest

/// ``TreeSoakTests`` with a watcher that leaves out what git ignores, and `.gitignore` files
/// written, rewritten and removed among the churn: the stream applied to the model gives the
/// disk less what git's rules ignore, and the directories watched are exactly those not ignored.
class GitIgnoreTreeSoakTests: TreeSoakTests {
    override var gitignore: Bool { true }

    override func testChurnInATreeReconcilesWithTheDisk() throws {
        try super.testChurnInATreeReconcilesWithTheDisk()
    }
}
