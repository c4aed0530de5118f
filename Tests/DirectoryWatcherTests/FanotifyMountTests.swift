import XCTest

@testable import DirectoryWatcher

/// The mount tests through fanotify, whose mark holds a descriptor of the mount.
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
}
