import XCTest

/// ``RescanTests`` with the kernel's own overflows: the queue filled past
/// `fs.inotify.max_queued_events` while the loop is stalled, and 40,000 files made meanwhile.
final class RescanStressTests: RescanTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    /// 40,000 files, the queue overflowed by themselves.
    override func testFilesCreatedWhileTheLoopIsStoppedAreEachReportedOnce() throws {
        try super.testFilesCreatedWhileTheLoopIsStoppedAreEachReportedOnce()
    }

    /// Behind a queue filled past its limit.
    override func testRemovedRenamedAndRewrittenWhileStoppedAreReportedAsSuch() throws {
        try super.testRemovedRenamedAndRewrittenWhileStoppedAreReportedAsSuch()
    }

    /// Behind a queue filled past its limit.
    override func testFilesCreatedWhileWatchingAreFollowedToTheirNewNamesAfterAnOverflow() throws {
        try super.testFilesCreatedWhileWatchingAreFollowedToTheirNewNamesAfterAnOverflow()
    }

    /// Behind a queue filled past its limit.
    override func testWithoutSnapshotsAnOverflowIsANoticeOnly() throws {
        try super.testWithoutSnapshotsAnOverflowIsANoticeOnly()
    }
}
