import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The polling backend on a local directory, forced: the same change tests as inotify's. The
/// interval is an hour, so a poll comes only when the test asks for one: a barrier on a polled
/// watcher polls at once and completes behind what it found.
final class PollingTests: WatchedDirectoryTestCase {
    private static let hour = DirectoryWatcher.Options(backend: .polling, pollingInterval: .seconds(3600))

    private func watchPolled(_ options: DirectoryWatcher.Options = PollingTests.hour) throws {
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, options: options, delegate: $0) }
    }

    func testTheChoiceIsReadableAndSaysPolling() throws {
        try watchPolled()
        let choice = try XCTUnwrap(watcher.backendChoice)
        XCTAssertEqual(choice.kind, .polling)
        XCTAssertEqual(choice.interval, .seconds(3600))
        XCTAssertEqual(choice.reason, "polling was asked for")
        XCTAssertEqual(choice.description, "polling every 3600 s: polling was asked for")
        XCTAssertFalse(ProcessResources.isWatched(directory.path), "no kernel watch")
        watcher.stopMonitoring()
        XCTAssertNil(watcher.backendChoice, "none while stopped")
    }

    func testCreatedModifiedAttributesRemovedAndRenamed() throws {
        directory.touch("existing")
        try watchPolled()
        let created = directory.touch("new")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, created)])
        directory.write("new", "text")
        XCTAssertEqual(delivered(), [DirectoryChange(.modified, created)])
        XCTAssertEqual(chmod(created, 0o600), 0)
        XCTAssertEqual(delivered(), [DirectoryChange(.attributesChanged, created)])
        XCTAssertEqual(rename(created, directory.url("renamed")), 0)
        XCTAssertEqual(delivered(), [DirectoryChange(.renamed, directory.url("renamed"), from: created)])
        XCTAssertEqual(unlink(directory.url("renamed")), 0)
        XCTAssertEqual(delivered(), [DirectoryChange(.removed, directory.url("renamed"))])
        directory.mkdir("sub")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("sub"), directory: true)])
        XCTAssertEqual(delivered(), [], "nothing changed: nothing reported")
    }

    func testMovesAcrossItsEdgeAreCreationsAndRemovals() throws {
        let outside = TemporaryDirectory()
        let file = outside.touch("file")
        try watchPolled()
        XCTAssertEqual(rename(file, directory.url("file")), 0)
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("file"))], "moved in")
        XCTAssertEqual(rename(directory.url("file"), outside.url("back")), 0)
        XCTAssertEqual(delivered(), [DirectoryChange(.removed, directory.url("file"))], "moved out")
    }

    func testTheDirectoryRemovedEndsTheWatch() throws {
        let path = directory.mkdir("goes")
        try watch { try DirectoryWatcher.watchFolder(path: path, options: Self.hour, delegate: $0) }
        XCTAssertEqual(rmdir(path), 0)
        XCTAssertEqual(delivered(), [DirectoryChange(.rootRemoved, path, directory: true)])
        XCTAssertFalse(watcher.isMonitoring)
    }

    func testAMissingDirectoryFailsToStart() {
        XCTAssertThrowsError(
            try DirectoryWatcher.watchFolder(path: directory.url("missing"), options: Self.hour) { _ in }
        ) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .noSuchPath)
        }
    }

    func testATreeIsPolledWhole() throws {
        directory.mkdir("old")
        directory.touch("old/kept")
        var options = Self.hour
        options.recursive = true
        try watchPolled(options)
        directory.mkdir("a")
        directory.mkdir("a/b")
        let file = directory.touch("a/b/file")
        XCTAssertEqual(
            Set(delivered()),
            [
                DirectoryChange(.created, directory.url("a"), directory: true),
                DirectoryChange(.created, directory.url("a/b"), directory: true), DirectoryChange(.created, file),
            ])
        XCTAssertEqual(
            Set(watcher.watchedDirectories()),
            Set(
                [directory.path, directory.url("old"), directory.url("a"), directory.url("a/b")].map {
                    FileSystemPath($0)
                }))
        XCTAssertEqual(rename(directory.url("a"), directory.url("c")), 0)
        XCTAssertEqual(
            delivered(), [DirectoryChange(.renamed, directory.url("c"), from: directory.url("a"), directory: true)])
        let later = directory.touch("c/b/later")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, later)], "below the new path")
        directory.write("old/kept", "more")
        XCTAssertEqual(delivered(), [DirectoryChange(.modified, directory.url("old/kept"))])
    }

    func testAFileWatchIsPolledThroughAtomicSaves() throws {
        let file = directory.touch("config")
        try watch { try DirectoryWatcher.watchFile(path: file, options: Self.hour, delegate: $0) }
        directory.touch("sibling")
        directory.write("config", "one")
        XCTAssertEqual(delivered(), [DirectoryChange(.modified, file)])
        directory.touch("config.tmp")
        XCTAssertEqual(delivered(), [], "another name")
        XCTAssertEqual(rename(directory.url("config.tmp"), file), 0)
        XCTAssertEqual(delivered(), [DirectoryChange(.renamed, file, from: directory.url("config.tmp"))])
        // Saved between two polls, the temporary name is never seen: the file was replaced.
        directory.touch("config.tmp")
        XCTAssertEqual(rename(directory.url("config.tmp"), file), 0)
        XCTAssertEqual(delivered(), [DirectoryChange(.removed, file), DirectoryChange(.created, file)])
    }

    func testPauseAndResumeOfAPolledWatcher() throws {
        try watchPolled()
        XCTAssertTrue(watcher.pause())
        let file = directory.touch("while-paused")
        XCTAssertEqual(delivered(), [], "no poll while paused")
        XCTAssertTrue(watcher.resume())
        var change = DirectoryChange(.created, file)
        change.whilePaused = true
        XCTAssertEqual(delivered(), [change])
    }

    func testAPollingIntervalOfZeroIsRefused() {
        XCTAssertThrowsError(
            try DirectoryWatcher.watchFolder(
                path: directory.path, options: .init(backend: .polling, pollingInterval: .zero)
            ) { _ in }
        ) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .invalidOption)
            XCTAssertTrue("\(error)".contains("polling interval"), "\(error)")
        }
    }

    // MARK: - On the loop's clock

    /// Polls come on the loop's timers: at the interval while quiet, a quarter of it after a
    /// change, and the loop sleeps with no timeout once no watcher polls.
    func testPollsComeOnTheLoopsClockAndStopWithTheLastPolledWatcher() throws {
        let sleeps = SleepRecorder(self, description: "an epoll_wait with no timeout once nothing polls")
        let timeouts = sleeps.timeouts
        let clock = ManualClock()
        let loop = try EventLoop(system: System(sleeps.calls), clock: { clock.now })
        defer { loop.shutdown() }
        // An inotify watcher of another directory: its barrier says the loop has had a wake-up.
        let elsewhere = TemporaryDirectory()
        let probe = try DirectoryWatcher.make(
            path: elsewhere.path, options: .init(recovery: .notice), delegate: Recorder(), queue: nil, loop: loop)
        defer { probe.invalidate() }
        let recorder = Recorder()
        let polled = try DirectoryWatcher.make(
            path: directory.path, options: .init(backend: .polling, pollingInterval: .seconds(2)), delegate: recorder,
            queue: nil, loop: loop)
        timeouts.set([])
        waitForDelivery(probe)
        XCTAssertTrue(timeouts.get().contains { $0 > 1_900_000_000 && $0 <= 2_000_000_000 }, "\(timeouts.get())")

        let file = directory.touch("a")
        SettledWatcherTests.pass(milliseconds: 1_999, on: clock, probe: probe, in: self)
        XCTAssertEqual(recorder.changes, [], "not due yet")
        SettledWatcherTests.pass(milliseconds: 1, on: clock, probe: probe, in: self)
        XCTAssertEqual(recorder.changes, [DirectoryChange(.created, file)], "due at the interval")

        // After a change, the next poll comes a quarter of the interval later.
        let second = directory.touch("b")
        SettledWatcherTests.pass(milliseconds: 500, on: clock, probe: probe, in: self)
        XCTAssertEqual(recorder.changes.last, DirectoryChange(.created, second))

        polled.invalidate()
        sleeps.idle.set(true)
        waitForDelivery(probe)
        wait(for: [sleeps.sleptForEver], timeout: 20)
    }

    // MARK: - The automatic choice, each file system faked

    /// A loop whose `statfs` says `magic`, and whose `/proc/self/mountinfo` says `mountinfo`.
    private func loop(faking magic: UInt64, mountinfo: String? = nil) throws -> EventLoop {
        var calls = SystemCalls.live
        let live = calls
        calls.fileSystemType = { _ in Int64(magic) }
        if let mountinfo {
            let fake = directory.url(".mountinfo")
            XCTAssertTrue(FileManager.default.createFile(atPath: fake, contents: Data(mountinfo.utf8)))
            calls.openFile = { path in
                String(cString: path) == "/proc/self/mountinfo"
                    ? fake.withCString { live.openFile($0) } : live.openFile(path)
            }
        }
        return try EventLoop(system: System(calls))
    }

    private func choice(faking magic: UInt64, mountinfo: String? = nil) throws -> DirectoryWatcher.BackendChoice? {
        let loop = try loop(faking: magic, mountinfo: mountinfo)
        defer { loop.shutdown() }
        let watcher = try DirectoryWatcher.make(path: directory.path, delegate: Recorder(), queue: nil, loop: loop)
        defer { watcher.invalidate() }
        return watcher.backendChoice
    }

    func testNetworkAndSharedFileSystemsArePolled() throws {
        let remote: [(UInt64, String)] = [
            (0x6969, "nfs"), (0x517B, "smb"), (0xFE53_4D42, "smb2"), (0xFF53_4D42, "cifs"), (0x0102_1997, "9p"),
            (0x00C3_6400, "ceph"), (0x5346_414F, "afs"), (0x7375_7245, "coda"), (0x564C, "ncp"),
            (0x7461_636F, "ocfs2"),
        ]
        for (magic, name) in remote {
            let choice = try XCTUnwrap(try choice(faking: magic))
            XCTAssertEqual(choice.kind, .polling, name)
            XCTAssertEqual(choice.fileSystem, name)
            XCTAssertEqual(choice.interval, .seconds(1))
            XCTAssertTrue(choice.reason.contains("whose changes made elsewhere inotify does not see"), choice.reason)
        }
    }

    func testLocalFileSystemsUseInotify() throws {
        for (magic, name) in [
            (UInt64(0xEF53), "ext4"), (0x5846_5342, "xfs"), (0x0102_1994, "tmpfs"), (0x1234_5678, "0x12345678"),
        ] {
            let choice = try XCTUnwrap(try choice(faking: magic))
            XCTAssertEqual(choice.kind, .inotify, name)
            XCTAssertEqual(choice.fileSystem, name)
            XCTAssertNil(choice.warning)
        }
    }

    func testFUSEIsPolledUnlessKnownToBeLocal() throws {
        func mountinfo(_ type: String, source: String = "src") -> String {
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
                + "42 1 0:50 / \(directory.path) rw,nosuid - \(type) \(source) rw,user_id=0\n"
        }
        let sshfs = try XCTUnwrap(try choice(faking: 0x6573_5546, mountinfo: mountinfo("fuse.sshfs")))
        XCTAssertEqual(sshfs.kind, .polling)
        XCTAssertEqual(sshfs.fileSystem, "fuse.sshfs")
        let overlay = try XCTUnwrap(try choice(faking: 0x6573_5546, mountinfo: mountinfo("fuse.fuse-overlayfs")))
        XCTAssertEqual(overlay.kind, .inotify)
        let disk = try XCTUnwrap(try choice(faking: 0x6573_5546, mountinfo: mountinfo("fuseblk")))
        XCTAssertEqual(disk.kind, .inotify)
        let unknown = try XCTUnwrap(try choice(faking: 0x6573_5546, mountinfo: "garbage\n"))
        XCTAssertEqual(unknown.kind, .polling, "a FUSE mount nobody knows is polled")
        XCTAssertEqual(unknown.fileSystem, "fuse")
    }

    func testVirtualFileSystemsWarn() throws {
        for (magic, name) in [
            (UInt64(0x9FA0), "proc"), (0x6265_6572, "sysfs"), (0x0027_E0EB, "cgroup"), (0x6367_7270, "cgroup2"),
        ] {
            let choice = try XCTUnwrap(try choice(faking: magic))
            XCTAssertEqual(choice.kind, .inotify, name)
            let warning = try XCTUnwrap(choice.warning, name)
            XCTAssertTrue(warning.contains("the kernel's own changes raise no event"), warning)
        }
    }

    func testTheRealProcIsWarnedAbout() throws {
        let watcher = try DirectoryWatcher.watchFolder(path: "/proc") { _ in }
        defer { watcher.invalidate() }
        XCTAssertEqual(watcher.backendChoice?.fileSystem, "proc")
        XCTAssertNotNil(watcher.backendChoice?.warning)
    }

    /// With no inotify (the kernel has none, or the user's instances are used up), an automatic
    /// watcher polls, and says why; one that insists on inotify is refused with the reason.
    func testWithoutInotifyAnAutomaticWatcherPolls() throws {
        for code in [EMFILE, ENOSYS] {
            let loop = try EventLoop(
                system: System(.live.failing(\.inotifyInit1, errno: code)), startsWithoutInotify: true)
            defer { loop.shutdown() }
            let recorder = Recorder()
            let watcher = try DirectoryWatcher.make(path: directory.path, delegate: recorder, queue: nil, loop: loop)
            defer { watcher.invalidate() }
            let choice = try XCTUnwrap(watcher.backendChoice)
            XCTAssertEqual(choice.kind, .polling)
            XCTAssertTrue(choice.reason.hasPrefix("inotify is unavailable ("), choice.reason)
            let file = directory.touch("made-\(code)")
            waitForDelivery(watcher)
            XCTAssertEqual(recorder.changes, [DirectoryChange(.created, file)])
            XCTAssertThrowsError(
                try DirectoryWatcher.make(
                    path: directory.path, options: .init(backend: .inotify), delegate: Recorder(), queue: nil,
                    loop: loop)
            ) { error in
                let expected: DirectoryWatcherError.Code =
                    code == EMFILE ? .instanceLimitReached : .other(errno: ENOSYS)
                XCTAssertEqual((error as? DirectoryWatcherError)?.code, expected)
            }
        }
    }

    func testInotifyCanBeForcedOnANetworkFileSystem() throws {
        let loop = try loop(faking: 0x6969)
        defer { loop.shutdown() }
        let watcher = try DirectoryWatcher.make(
            path: directory.path, options: .init(backend: .inotify), delegate: Recorder(), queue: nil, loop: loop)
        defer { watcher.invalidate() }
        XCTAssertEqual(watcher.backendChoice?.kind, .inotify)
        XCTAssertEqual(watcher.backendChoice?.fileSystem, "nfs")
    }
}
