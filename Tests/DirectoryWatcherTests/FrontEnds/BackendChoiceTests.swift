import Glibc
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Which backend a watcher uses, from what was asked and what is known of the file system:
/// a pure function, tested here case by case with no kernel.
final class BackendChoiceTests: XCTestCase {
    private let ext4 = FileSystemKind.of(magic: 0xEF53, mountType: { nil })
    private let nfs = FileSystemKind.of(magic: FileSystemKind.nfs, mountType: { nil })
    private let proc = FileSystemKind.of(magic: FileSystemKind.procfs, mountType: { nil })

    private func choice(
        _ options: DirectoryWatcher.Options = DirectoryWatcher.Options(), file: Bool = false,
        on kind: FileSystemKind?, inotifyUnavailable: SyscallError? = nil
    ) -> DirectoryWatcher.BackendChoice {
        DirectoryWatcher.chooseBackend(
            for: "/srv/x", options: options, watchesFile: file, fileSystem: kind,
            inotifyUnavailable: inotifyUnavailable)
    }

    func testAutomaticWatchesALocalDirectoryThroughInotifyAndPollsARemoteOne() {
        XCTAssertEqual(choice(on: ext4).kind, .inotify)
        XCTAssertEqual(choice(on: ext4).reason, "/srv/x is on ext4, a local file system")
        let remote = choice(on: nfs)
        XCTAssertEqual(remote.kind, .polling)
        XCTAssertEqual(remote.interval, DirectoryWatcher.Options().pollingInterval)
        XCTAssertTrue(remote.reason.contains("nfs"), remote.reason)
        XCTAssertEqual(choice(on: nil).kind, .inotify, "unknown: inotify, which sees local changes at least")
    }

    func testAutomaticTriesFanotifyForATreeUnlessItFollowsLinks() {
        XCTAssertEqual(choice(DirectoryWatcher.Options(recursive: true), on: ext4).kind, .fanotify)
        XCTAssertEqual(choice(DirectoryWatcher.Options(recursive: true), file: true, on: ext4).kind, .inotify)
        let following = choice(DirectoryWatcher.Options(recursive: true, followsSymbolicLinks: true), on: ext4)
        XCTAssertEqual(following.kind, .inotify)
        XCTAssertTrue(following.reason.contains("symbolic links"), following.reason)
        XCTAssertEqual(choice(DirectoryWatcher.Options(recursive: true), on: proc).kind, .inotify)
    }

    func testWithoutInotifyEverythingAutomaticIsPolledAndSaysWhy() {
        let unavailable = SyscallError(function: "inotify_init1", errno: EMFILE)
        let polled = choice(on: ext4, inotifyUnavailable: unavailable)
        XCTAssertEqual(polled.kind, .polling)
        XCTAssertTrue(polled.reason.hasPrefix("inotify is unavailable ("), polled.reason)
    }

    func testWhatIsAskedForIsUsedAndAVirtualFileSystemIsWarnedOf() {
        XCTAssertEqual(choice(DirectoryWatcher.Options(backend: .polling), on: ext4).kind, .polling)
        XCTAssertEqual(choice(DirectoryWatcher.Options(backend: .inotify), on: nfs).kind, .inotify)
        XCTAssertEqual(choice(DirectoryWatcher.Options(backend: .fanotify), on: ext4).kind, .inotify, "not a tree")
        XCTAssertEqual(
            choice(DirectoryWatcher.Options(recursive: true, backend: .fanotify), on: ext4).kind, .fanotify)
        let virtual = choice(DirectoryWatcher.Options(backend: .inotify), on: proc)
        XCTAssertNotNil(virtual.warning)
        XCTAssertNil(choice(on: ext4).warning)
    }
}
