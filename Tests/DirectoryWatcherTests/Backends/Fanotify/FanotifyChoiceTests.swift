import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// When a tree uses fanotify, and what it says when it cannot.
final class FanotifyChoiceTests: WatchedDirectoryTestCase {
    /// A loop whose `fanotify_mark` fails as it does without `CAP_SYS_ADMIN` (EPERM).
    private func loopWithoutTheCapability() throws -> EventLoop {
        var calls = SystemCalls.live
        calls.fanotifyMarkFileSystem = { _, _, _, _ in
            errno = EPERM
            return -1
        }
        return try EventLoop(system: System(calls))
    }

    private func watchTree(on loop: EventLoop, backend: DirectoryWatcher.Backend = .automatic) throws {
        try watch {
            try DirectoryWatcher.make(
                path: directory.path, options: DirectoryWatcher.Options(recursive: true, backend: backend),
                delegate: $0,
                queue: nil, loop: loop)
        }
    }

    func testARecursiveWatcherUsesFanotifyAndNoInotifyWatch() throws {
        for index in 0..<50 { directory.mkdir("d\(index)") }
        try watch {
            try DirectoryWatcher.watchFolder(path: directory.path, options: .init(recursive: true), delegate: $0)
        }
        let choice = try XCTUnwrap(watcher.backendChoice)
        XCTAssertEqual(choice.kind, .fanotify)
        XCTAssertTrue(choice.description.hasPrefix("fanotify: "), choice.description)
        let watched = ProcessResources.watchedInodes()
        for name in [""] + (0..<50).map({ "d\($0)" }) {
            var status = stat()
            XCTAssertEqual(stat(directory.url(name), &status), 0)
            XCTAssertFalse(watched.contains(UInt64(status.st_ino)), "\(name) has an inotify watch")
        }
        directory.touch("d49/f")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("d49/f"))])
        XCTAssertEqual(watcher.watchedDirectories().count, 51)
    }

    func testADirectoryOrFileWatchUsesInotifyEvenWhenFanotifyIsAskedFor() throws {
        try watch {
            try DirectoryWatcher.watchFolder(path: directory.path, options: .init(backend: .fanotify), delegate: $0)
        }
        XCTAssertEqual(watcher.backendChoice?.kind, .inotify)
        XCTAssertTrue(watcher.backendChoice?.reason.contains("fanotify watches trees") ?? false)
    }

    /// Without the capability, an automatic tree is watched through inotify, and says why.
    func testWithoutTheCapabilityATreeFallsBackToInotifyAndSaysWhy() throws {
        directory.mkdir("a")
        let loop = try loopWithoutTheCapability()
        defer { loop.shutdown() }
        try watchTree(on: loop)
        let choice = try XCTUnwrap(watcher.backendChoice)
        XCTAssertEqual(choice.kind, .inotify)
        XCTAssertTrue(choice.reason.contains("fanotify cannot be used"), choice.reason)
        XCTAssertTrue(choice.reason.contains("CAP_SYS_ADMIN"), choice.reason)
        XCTAssertTrue(ProcessResources.isWatched(directory.url("a")), "watched through inotify")
        directory.touch("a/f")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/f"))])
    }

    /// An unprivileged process keeps no fanotify group it cannot mark anything with, and does not
    /// try again for every tree.
    func testWithoutTheCapabilityNoGroupIsKeptNorOpenedAgain() throws {
        let opened = LockedValue(0)
        var calls = SystemCalls.live
        calls.fanotifyInit = {
            opened.update { $0 += 1 }
            return SystemCalls.live.fanotifyInit()
        }
        calls.fanotifyMarkFileSystem = { _, _, _, _ in
            errno = EPERM
            return -1
        }
        let loop = try EventLoop(system: System(calls))
        defer { loop.shutdown() }
        try watchTree(on: loop)
        XCTAssertEqual(watcher.backendChoice?.kind, .inotify)
        let second = try DirectoryWatcher.make(
            path: directory.mkdir("second"), options: .init(recursive: true), delegate: Recorder(), queue: nil,
            loop: loop)
        defer { second.invalidate() }
        XCTAssertEqual(second.backendChoice?.kind, .inotify)
        XCTAssertTrue(second.backendChoice?.reason.contains("CAP_SYS_ADMIN") ?? false)
        XCTAssertEqual(opened.get(), 1, "fanotify_init once")
        XCTAssertFalse(
            ProcessResources.descriptorTargets().values.contains("anon_inode:[fanotify]"), "no group kept")
    }

    func testFanotifyForcedWithoutTheCapabilityFailsNamingThePathAndTheCause() throws {
        let loop = try loopWithoutTheCapability()
        defer { loop.shutdown() }
        XCTAssertThrowsError(try watchTree(on: loop, backend: .fanotify)) { error in
            let failure = error as? DirectoryWatcherError
            XCTAssertEqual(failure?.code, .backendUnavailable)
            let message = failure?.description ?? ""
            XCTAssertTrue(message.contains(directory.path), message)
            XCTAssertTrue(message.contains("CAP_SYS_ADMIN"), message)
        }
    }

    func testAFileSystemWithoutHandlesFallsBackToInotify() throws {
        var calls = SystemCalls.live
        calls.nameToHandle = { _, _, _, _, _ in
            errno = EOPNOTSUPP
            return -1
        }
        let loop = try EventLoop(system: System(calls))
        defer { loop.shutdown() }
        try watchTree(on: loop)
        XCTAssertEqual(watcher.backendChoice?.kind, .inotify)
        XCTAssertTrue(watcher.backendChoice?.reason.contains("gives no file handles") ?? false)
    }

    func testFollowingLinksChoosesInotify() throws {
        try watch {
            try DirectoryWatcher.watchFolder(
                path: directory.path, options: .init(recursive: true, followsSymbolicLinks: true), delegate: $0)
        }
        XCTAssertEqual(watcher.backendChoice?.kind, .inotify)
        XCTAssertTrue(watcher.backendChoice?.reason.contains("symbolic links") ?? false)
    }

    /// A tree uses no inotify watch through fanotify, so the watch limit cannot stop it: every
    /// directory is watched while the process's count of inotify watches stays where it was.
    /// (That inotify stops at the limit, and says so, is shown without changing the machine's
    /// `fs.inotify.max_user_watches`: in a user namespace of its own, by
    /// `EndToEndTests.testTheWatchLimitOfItsOwnUserNamespaceIsNamedAndTheRestIsWatched`.)
    func testATreeIsWatchedWholeWithoutAnyInotifyWatch() throws {
        for index in 0..<300 { directory.mkdir("d\(index)") }
        // The shared loop's own watch is in place before counting.
        let holder = try DirectoryWatcher.watchFolder(path: directory.path, options: .init()) { _ in }
        defer { holder.invalidate() }
        let watches = ProcessResources.kernelWatches()
        try watch {
            try DirectoryWatcher.watchFolder(
                path: directory.path, options: .init(recursive: true, backend: .fanotify), delegate: $0)
        }
        XCTAssertEqual(watcher.watchedDirectories().count, 301)
        XCTAssertEqual(ProcessResources.kernelWatches(), watches, "no inotify watch for the tree")
        directory.touch("d299/f")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("d299/f"))])
    }
}
