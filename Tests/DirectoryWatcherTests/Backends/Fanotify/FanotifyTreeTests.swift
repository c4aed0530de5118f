import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The tree tests through fanotify: one mark for the test directory's whole file system, and no
/// inotify watch. (The tests run as root here, which has `CAP_SYS_ADMIN`.) Where fanotify differs
/// from inotify by design, the test says how.
class FanotifyTreeTests: TreeTests {
    override var backend: DirectoryWatcher.Backend { .fanotify }

    /// Nothing is walked before the watcher is ready; the listing after it (for exact recovery)
    /// meets the rename instead: the rename is reported, and the directory is listed at its new
    /// path once the rename's event comes.
    override func testADirectoryRenamedWhileTheTreeIsWalkedIsWatchedWhole() throws {
        for made in ["a", "a/x", "a/x/y"] { mkdir(made) }
        let (from, to) = (directory.url("a/x"), directory.url("a/z"))
        let loop = try watchTree(on: calls(renamingAt: "/a/x") { _ = Glibc.rename(from, to) })
        defer { loop.shutdown() }
        // Finishes the listing, which renames a/x as it is about to list it.
        _ = watcher.watchedDirectories()
        XCTAssertEqual(delivered(), [DirectoryChange(.renamed, to, from: from, directory: true)])
        XCTAssertEqual(
            Set(watcher.watchedDirectories()),
            Set([directory.path, directory.url("a"), to, directory.url("a/z/y")].map { FileSystemPath($0) }))
        directory.touch("a/z/y/f")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/z/y/f"))])
    }

    /// Nothing hooks the walk at a watch (there is none to add): the tree moved in is reported as
    /// it is.
    override func testARenameTheListingAlreadyShowsIsNotReportedAgain() throws {
        let outside = outsideTree()
        try watchTree()
        rename(outside.url("out"), directory.url("out"))
        XCTAssertEqual(
            delivered(),
            [
                DirectoryChange(.movedIn, directory.url("out"), directory: true),
                DirectoryChange(.created, directory.url("out/x"), directory: true),
                DirectoryChange(.created, directory.url("out/x/y"), directory: true),
                DirectoryChange(.created, directory.url("out/x/y/report.txt")),
            ])
    }

    /// The queue overflows (FAN_Q_OVERFLOW) while the loop is held up: what changed in
    /// directories that had no event before (known only from the listing after readiness) is
    /// found by the rescan, exactly.
    func testAnOverflowIsRecoveredExactlyInDirectoriesKnownFromTheListingAlone() throws {
        mkdir("a")
        mkdir("a/b")
        directory.touch("a/b/old")
        directory.touch("a/b/kept")
        // Born before the listing's tick, so the listing vouches for their inodes, and the rescan
        // follows `kept` to its new name.
        RescanTests.waitForTheBirthClockToTick()
        let loss = try QueueLoss(scale, fanotify: !usesInotify)
        defer {
            watcher?.invalidate()
            loss.shutdown()
        }
        try watchTree(loop: loss.loop)
        // The listing after readiness is finished (a loaded machine may not have finished it
        // before readiness): exact recovery starts from it.
        XCTAssertEqual(watcher.watchedDirectories().count, 3)
        try loss.lose(test: self, fillers: directory) {
            directory.touch("a/b/new")
            XCTAssertEqual(unlink(directory.url("a/b/old")), 0)
            rename(directory.url("a/b/kept"), directory.url("a/b/moved"))
        }
        let changes = delivered()
        XCTAssertTrue(changes.contains { $0.kind == .overflow }, "the queue overflowed")
        let found = changes.filter { $0.path.description.contains("/a/b/") }
        var expected = [
            DirectoryChange(.created, directory.url("a/b/new")),
            DirectoryChange(.removed, directory.url("a/b/old")),
            DirectoryChange(.renamed, directory.url("a/b/moved"), from: directory.url("a/b/kept")),
        ]
        for index in expected.indices { expected[index].foundByRescan = true }
        XCTAssertEqual(Set(found.filter { $0.kind != .attributesChanged && $0.kind != .modified }), Set(expected))
        XCTAssertTrue(found.allSatisfy(\.foundByRescan), "\(found)")
        directory.touch("a/b/later")
        XCTAssertEqual(
            delivered().filter { $0.kind == .created }, [DirectoryChange(.created, directory.url("a/b/later"))])
    }

    /// fanotify follows no link out of the tree: forced, the watcher says why it cannot start.
    override func testFollowedLinksWatchWhatTheyLeadToOnceEvenInALoop() throws {
        XCTAssertThrowsError(try watchTree(followsSymbolicLinks: true)) { error in
            let failure = error as? DirectoryWatcherError
            XCTAssertEqual(failure?.code, .backendUnavailable)
            XCTAssertTrue(failure?.description.contains("symbolic links") ?? false, "\(error)")
        }
    }

    override func testAFollowedLinkMadeOrRemovedWhileWatchingIsWatchedOrLetGo() throws {
        try testFollowedLinksWatchWhatTheyLeadToOnceEvenInALoop()
    }

    /// No inotify watch is used, so the inotify watch limit cannot be reached: the directory whose
    /// watch inotify could not add is watched with the rest.
    override func testTheWatchLimitReachedPartWayIsReportedAndTheRestIsWatched() throws {
        // Every inotify watch of the tree would fail (the loop's own barrier watch does not).
        let root = directory.path
        let calls = SystemCalls.live.failing(\.inotifyAddWatch, errno: ENOSPC) { _, path, _ in
            var target = [UInt8](repeating: 0, count: Int(PATH_MAX))
            let length = readlink(path, &target, target.count)
            return String(cString: path).hasPrefix(root)
                || (length > 0 && String(decoding: target[..<length], as: UTF8.self).hasPrefix(root))
        }
        try watchTree(failingAt: "deep", calls: calls) { notices, created in
            XCTAssertEqual(notices, [])
            XCTAssertEqual(created, [DirectoryChange(.created, directory.url("b/f"))])
            XCTAssertEqual(
                Set(watcher.watchedDirectories()),
                Set(
                    [FileSystemPath(directory.path)]
                        + ["a", "a/deep", "a/deep/below", "b"].map { FileSystemPath(directory.url($0)) }))
            directory.touch("a/deep/below/g")
            XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/deep/below/g"))])
        }
    }

    /// The watch does not depend on reading the directory: one that cannot be listed is still
    /// seen (its exact recovery after an overflow is what it lacks).
    override func testAnUnreadableSubdirectoryIsReportedAndSkipped() throws {
        let calls = SystemCalls.live.failing(\.openDirectory, errno: EACCES) { path, _ in
            String(cString: path).hasSuffix("/secret")
        }
        try watchTree(failingAt: "secret", calls: calls) { notices, created in
            XCTAssertEqual(notices, [])
            XCTAssertEqual(created, [DirectoryChange(.created, directory.url("b/f"))])
            directory.touch("a/secret/below/f")
            XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/secret/below/f"))])
        }
    }

    /// Nothing was said of the unreadable directory (its events are seen all the same), so
    /// nothing is reported when it becomes readable (`FAN_ATTRIB`): it is listed then, and what
    /// is below it, so that an overflow's rescan finds what was made there while the queue was
    /// lost. (Before: it was never listed, and such a file never reported.)
    override func testAnUnreadableSubdirectoryMadeReadableIsWatchedAndWhatItHoldsReported() throws {
        for made in ["a", "a/secret", "a/secret/below", "b"] { mkdir(made) }
        let refusing = LockedValue(true)
        let injection = OverflowInjection()
        let calls = SystemCalls.live.failing(\.openDirectory, errno: EACCES) { path, _ in
            refusing.get() && String(cString: path).hasSuffix("/secret")
        }
        let loop = try EventLoop(system: System(calls.overflowingNextRead(injection)))
        defer {
            watcher?.invalidate()
            loop.shutdown()
        }
        try watchTree(loop: loop)
        // Its own change of attributes is reported, as through inotify.
        let attributes = DirectoryChange(.attributesChanged, directory.url("a/secret"), directory: true)
        XCTAssertEqual(chmod(directory.url("a/secret"), 0o700), 0)
        XCTAssertEqual(delivered(), [attributes])
        refusing.set(false)
        XCTAssertEqual(chmod(directory.url("a/secret"), 0o755), 0)
        XCTAssertEqual(delivered(), [attributes])
        XCTAssertTrue(watcher.watchedDirectories().contains(path("a/secret/below")))
        let staller = try Staller(test: self, loop: loop)
        directory.touch("a/secret/below/h")
        injection.arm(fanotify: true)
        staller.resume()
        let changes = delivered()
        XCTAssertEqual(changes.first?.kind, .overflow)
        let found = changes.filter { $0.kind == .created }
        XCTAssertEqual(found.map(\.path), [path("a/secret/below/h")])
        XCTAssertTrue(found.allSatisfy(\.foundByRescan))
    }
}
