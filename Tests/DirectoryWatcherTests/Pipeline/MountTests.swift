import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Mounts made and taken away inside a tree and under it, through inotify here; the same tests
/// run through fanotify in ``FanotifyMountTests``. Each test mounts a tmpfs of its own (root
/// only; skipped otherwise) and takes every mount it made away again, lazily, whatever happened.
class MountTests: WatchedDirectoryTestCase {
    /// The backend every tree of these tests is watched through.
    var backend: DirectoryWatcher.Backend { .inotify }
    var usesInotify: Bool { backend == .inotify }
    /// The mount points made by the test that are still mounted.
    private var mounted: [String] = []

    override func tearDown() {
        // The watcher first (a fanotify tree holds its file system), then the mounts, lazily so
        // that nothing a failure left open keeps them, then the directory.
        watcher?.invalidate()
        for point in mounted.reversed() { _ = umount2(point, Int32(MNT_DETACH)) }
        mounted = []
        super.tearDown()
    }

    /// Mounts a fresh tmpfs on the directory `name` (made if missing), or skips the test.
    func mountTmpfs(_ name: String) throws {
        try XCTSkipUnless(geteuid() == 0, "mounting a tmpfs needs CAP_SYS_ADMIN")
        let point = directory.url(name)
        if access(point, F_OK) != 0 { XCTAssertEqual(Glibc.mkdir(point, 0o755), 0) }
        guard Glibc.mount("tmpfs", point, "tmpfs", 0, "size=1m") == 0 else {
            throw XCTSkip("mount -t tmpfs failed here: \(String(cString: strerror(errno)))")
        }
        mounted.append(point)
    }

    /// Takes the mount on `name` away: lazily (`umount -l`), or plainly.
    func unmount(_ name: String, lazily: Bool) {
        let point = directory.url(name)
        XCTAssertEqual(
            umount2(point, lazily ? Int32(MNT_DETACH) : 0), 0, "umount \(point): \(String(cString: strerror(errno)))")
        mounted.removeAll { $0 == point }
    }

    func watchTree(_ name: String = "") throws {
        let options = DirectoryWatcher.Options(recursive: true, backend: backend)
        let root = name.isEmpty ? directory.path : directory.url(name)
        try watch { try DirectoryWatcher.watchFolder(path: root, options: options, delegate: $0) }
        XCTAssertEqual(watcher.backendChoice?.kind, usesInotify ? .inotify : .fanotify)
    }

    /// The table by mount id: a mount stacked on another's mount point (listed after it) holds
    /// the paths below; an escaped space is a space.
    func testTheMountTableGivesEachMountItsIdAndAPathTheMountOnTop() {
        let table = """
            1 0 8:1 / / rw - ext4 /dev/sda1 rw
            20 1 0:30 / /srv/a\\040b rw shared:2 - tmpfs tmpfs rw
            21 20 0:31 / /srv/a\\040b rw - tmpfs tmpfs rw
            not a line
            """
        let mounts = MountTable.mounts(in: table)
        XCTAssertEqual(mounts.map(\.id), [1, 20, 21])
        XCTAssertEqual(mounts[1].mountPoint, FileSystemPath("/srv/a b"))
        XCTAssertEqual(MountTable.mount(of: FileSystemPath("/srv/a b/c"), in: mounts)?.id, 21)
        XCTAssertEqual(MountTable.mount(of: FileSystemPath("/srv/a"), in: mounts)?.id, 1)
    }

    /// `umount -l` of the tree's own file system ends the watch: inotify hears `IN_UNMOUNT` of
    /// every directory; a fanotify tree, whose mark's descriptor keeps the file system alive,
    /// hears it from the mount table (`/proc/self/mountinfo`).
    func testATreeWhoseFileSystemIsUnmountedLazilyEnds() throws {
        try mountTmpfs("m")
        XCTAssertEqual(Glibc.mkdir(directory.url("m/a"), 0o755), 0)
        try watchTree("m")
        directory.touch("m/a/f")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("m/a/f"))])
        unmount("m", lazily: true)
        XCTAssertEqual(delivered(), [DirectoryChange(.rootRemoved, directory.url("m"), directory: true)])
        XCTAssertFalse(watcher.isMonitoring, "the watch ended")
    }

    /// `umount -l` while a descriptor in the file system keeps it alive: the kernel tells no
    /// watch of its end (no `IN_UNMOUNT`), but the mount the tree's root was on is gone from the
    /// mount table, and the tree ends.
    func testATreeWhoseFileSystemIsKeptBusyEndsWhenItsMountIsTakenAway() throws {
        try mountTmpfs("m")
        try watchTree("m")
        let busy = open(directory.url("m"), O_RDONLY | O_DIRECTORY)
        XCTAssertGreaterThanOrEqual(busy, 0)
        defer { close(busy) }
        unmount("m", lazily: true)
        XCTAssertEqual(delivered(), [DirectoryChange(.rootRemoved, directory.url("m"), directory: true)])
        XCTAssertFalse(watcher.isMonitoring, "the watch ended")
    }

    /// A mount made on a directory of the tree, then taken away. Through inotify, whose watch
    /// stays on the directory the mount covers, the directory at that path is reported removed
    /// and created again with what it holds now, each time, and what happens in the mount is
    /// reported; through fanotify, whose mark does not see into another file system, one notice
    /// says so, and the directory is reported again once the mount is gone.
    func testAMountMadeAndTakenAwayInsideTheTreeIsReported() throws {
        try XCTSkipUnless(geteuid() == 0, "mounting a tmpfs needs CAP_SYS_ADMIN")
        mkdirs("a", "a/m")
        directory.touch("a/m/covered")
        try watchTree()
        try mountTmpfs("a/m")
        let point = directory.url("a/m")
        let made = delivered()
        if usesInotify {
            XCTAssertEqual(
                made,
                [DirectoryChange(.removed, point, directory: true), DirectoryChange(.created, point, directory: true)])
            directory.touch("a/m/new")
            mkdirs("a/m/d")
            directory.touch("a/m/d/f")
            XCTAssertEqual(
                delivered(),
                [
                    DirectoryChange(.created, directory.url("a/m/new")),
                    DirectoryChange(.created, directory.url("a/m/d"), directory: true),
                    DirectoryChange(.created, directory.url("a/m/d/f")),
                ])
        } else {
            XCTAssertEqual(made.map(\.kind), [.failed], "\(made)")
            XCTAssertEqual(made.first?.path, FileSystemPath(point))
            XCTAssertEqual(made.first?.error?.code, .backendUnavailable)
            directory.touch("a/m/new")
            XCTAssertEqual(delivered(), [], "nothing in the mount is seen")
        }
        unmount("a/m", lazily: false)
        XCTAssertEqual(
            delivered(),
            [
                DirectoryChange(.removed, point, directory: true), DirectoryChange(.created, point, directory: true),
                DirectoryChange(.created, directory.url("a/m/covered")),
            ])
        directory.touch("a/m/after")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/m/after"))])
    }

    /// A tree started with a mount inside it, which inotify's walk watches into: taken away, the
    /// directory it covered is reported and watched.
    func testAMountThereWhenTheTreeStartsIsReportedWhenTakenAway() throws {
        mkdirs("a", "a/m")
        directory.touch("a/m/covered")
        try mountTmpfs("a/m")
        directory.touch("a/m/mounted")
        try watchTree()
        directory.touch("a/m/seen")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/m/seen"))])
        unmount("a/m", lazily: false)
        let point = directory.url("a/m")
        XCTAssertEqual(
            delivered(),
            [
                DirectoryChange(.removed, point, directory: true), DirectoryChange(.created, point, directory: true),
                DirectoryChange(.created, directory.url("a/m/covered")),
            ])
        directory.touch("a/m/after")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/m/after"))])
    }

    func mkdirs(_ names: String...) {
        for name in names {
            XCTAssertEqual(
                Glibc.mkdir(directory.url(name), 0o755), 0, "mkdir \(name): \(String(cString: strerror(errno)))")
        }
    }
}
