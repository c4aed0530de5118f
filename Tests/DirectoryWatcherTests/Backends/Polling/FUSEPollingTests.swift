import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// A FUSE mount of a local folder (bindfs), changed behind the watcher's back through the folder
/// itself: the automatic choice polls it and sees the change; inotify on the mount never does.
final class FUSEPollingTests: XCTestCase {
    func testAChangeBehindAFUSEMountIsSeenByPollingAndMissedByInotify() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/bindfs"),
            FileManager.default.fileExists(atPath: "/dev/fuse")
        else {
            throw XCTSkip("needs bindfs and /dev/fuse (.ci/run installs bindfs)")
        }
        let source = TemporaryDirectory()
        let mount = TemporaryDirectory()
        // posix_spawn and waitpid rather than Foundation's Process, whose wait for a program
        // that forks a daemon (bindfs does) never returned here.
        func run(_ program: String, _ arguments: [String]) throws -> Int32 {
            let argv = ([program] + arguments).map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            var pid: pid_t = 0
            guard posix_spawn(&pid, program, nil, nil, argv, environ) == 0 else { return -1 }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            return (status >> 8) & 0xFF
        }
        guard try run("/usr/bin/bindfs", [source.path, mount.path]) == 0 else {
            throw XCTSkip("bindfs could not mount here (no FUSE for this process)")
        }
        defer { _ = try? run("/usr/bin/fusermount", ["-u", mount.path]) }

        let polledChanges = Recorder()
        let polled = try DirectoryWatcher.watchFolder(path: mount.path, delegate: polledChanges)
        defer { polled.invalidate() }
        XCTAssertEqual(polled.backendChoice?.kind, .polling, "\(String(describing: polled.backendChoice))")
        XCTAssertEqual(polled.backendChoice?.fileSystem, "fuse")
        let inotifyChanges = Recorder()
        let inotify = try DirectoryWatcher.watchFolder(
            path: mount.path, options: .init(backend: .inotify), delegate: inotifyChanges)
        defer { inotify.invalidate() }

        source.touch("behind")  // in the folder, not through the mount
        waitForDelivery(polled)
        waitForDelivery(inotify)
        XCTAssertEqual(polledChanges.changes, [DirectoryChange(.created, mount.url("behind"))])
        XCTAssertEqual(inotifyChanges.changes, [], "inotify on the mount never hears of it")

        // Through the mount, inotify sees it: the test's inotify watcher works.
        mount.touch("through")
        waitForDelivery(inotify)
        XCTAssertTrue(inotifyChanges.changes.contains(DirectoryChange(.created, mount.url("through"))))
    }
}
