import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// ``TreeSoakTests`` through fanotify: one mark for the file system, overflows of its queue
/// injected (the group's queue has no limit, so the kernel never overflows it).
class FanotifyTreeSoakTests: TreeSoakTests {
    override var backend: DirectoryWatcher.Backend { .fanotify }

    override func testChurnInATreeReconcilesWithTheDisk() throws {
        try super.testChurnInATreeReconcilesWithTheDisk()
    }
}
