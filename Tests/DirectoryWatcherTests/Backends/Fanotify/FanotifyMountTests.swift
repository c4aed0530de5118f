import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The mount tests through fanotify: its mark is of one file system, so a mount made inside a
/// tree is not seen into; the tree says so, once, when the mount is made.
final class FanotifyMountTests: MountTests {
    override var backend: DirectoryWatcher.Backend { .fanotify }

    /// A plain `umount` is refused while the tree watches: its mark's descriptor of the mount
    /// (what file handles are opened against) keeps the file system busy.
    func testAPlainUnmountIsRefusedWhileTheTreeWatches() throws {
        try mountTmpfs("m")
        try watchTree("m")
        XCTAssertEqual(umount2(directory.url("m"), 0), -1)
        XCTAssertEqual(errno, EBUSY)
        watcher.invalidate()
        unmount("m", lazily: false)
    }

    /// A mount already inside the tree is refused: the mark would not see into it (the
    /// automatic choice watches such a tree through inotify instead).
    override func testAMountThereWhenTheTreeStartsIsReportedWhenTakenAway() throws {
        mkdirs("a", "a/m")
        try mountTmpfs("a/m")
        XCTAssertThrowsError(try watchTree()) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .backendUnavailable)
            XCTAssertEqual((error as? DirectoryWatcherError)?.errno, EXDEV)
        }
    }
}
