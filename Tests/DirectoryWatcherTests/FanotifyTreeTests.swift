import Foundation
import XCTest

@testable import DirectoryWatcher

/// The tree tests through fanotify: one mark for the test directory's whole file system, and no
/// inotify watch. (The tests run as root here, which has `CAP_SYS_ADMIN`.) Where fanotify differs
/// from inotify by design, the test says how.
final class FanotifyTreeTests: TreeTests {
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
        try watchTree()
        // The listing after readiness is finished (a loaded machine may not have finished it
        // before readiness): exact recovery starts from it.
        XCTAssertEqual(watcher.watchedDirectories().count, 3)
        let staller = try RescanTests.Staller(test: self)
        for index in 0..<20_000 { directory.touch("filler-\(index)") }
        directory.touch("a/b/new")
        XCTAssertEqual(unlink(directory.url("a/b/old")), 0)
        rename(directory.url("a/b/kept"), directory.url("a/b/moved"))
        staller.resume()
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
}

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

    /// A tree larger than `fs.inotify.max_user_watches` (lowered for the test, and put back): every
    /// directory is watched through fanotify; inotify says it reached the limit.
    func testATreeLargerThanTheInotifyWatchLimitIsWatchedWholeThroughFanotify() throws {
        let limitFile = "/proc/sys/fs/inotify/max_user_watches"
        let original = try String(contentsOfFile: limitFile, encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        for index in 0..<300 { directory.mkdir("d\(index)") }
        // The shared loop's own watch is in place before the limit is lowered.
        let holder = try DirectoryWatcher.watchFolder(path: directory.path, options: .init()) { _ in }
        defer { holder.invalidate() }
        let inUse = ProcessResources.inotifyWatchesOfEveryProcess()
        try "\(inUse + 100)\n".write(toFile: limitFile, atomically: false, encoding: .utf8)
        defer { try? "\(original)\n".write(toFile: limitFile, atomically: false, encoding: .utf8) }

        try watch {
            try DirectoryWatcher.watchFolder(
                path: directory.path, options: .init(recursive: true, backend: .fanotify), delegate: $0)
        }
        XCTAssertEqual(watcher.watchedDirectories().count, 301)
        directory.touch("d299/f")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("d299/f"))])

        let inotify = Recorder()
        do {
            let tree = try DirectoryWatcher.watchFolder(
                path: directory.path, options: .init(recursive: true, backend: .inotify), delegate: inotify)
            defer { tree.invalidate() }
            waitForDelivery(tree)
            let refusal = inotify.changes.first { $0.error?.code == .watchLimitReached }
            let message = try XCTUnwrap(refusal?.error?.description, "\(inotify.changes.prefix(3))")
            XCTAssertTrue(message.contains("fs.inotify.max_user_watches"), message)
        } catch let error as DirectoryWatcherError {
            XCTAssertEqual(error.code, .watchLimitReached)
            XCTAssertTrue(error.description.contains("fs.inotify.max_user_watches"), error.description)
        }
    }
}

/// fanotify trees made and ended from many threads at once while their directories change: the
/// marks, their mount descriptors and the handle table come and go with them.
final class FanotifyLifetimeTests: WatchedDirectoryTestCase {
    func testTreesMadeAndEndedFromEightThreadsLeaveNoDescriptorOrMarkBehind() throws {
        // Another watcher keeps the loop, so what the trees leave behind is what is counted.
        let keeper = try DirectoryWatcher.watchFolder(path: directory.path) { _ in }
        defer { keeper.invalidate() }
        waitForDelivery(keeper)
        let descriptors = ProcessResources.descriptorTargets()
        let roots = (0..<8).map { directory.mkdir("t\($0)") }
        for root in roots {
            for index in 0..<10 { XCTAssertEqual(Glibc.mkdir("\(root)/d\(index)", 0o755), 0) }
        }
        let stop = LockedValue(false)
        let target = directory!
        let writer = Thread {
            var index = 0
            while !stop.get() {
                target.touch("t\(index % 8)/d\(index % 10)/f\(index % 7)")
                index += 1
            }
        }
        writer.start()
        let failures = LockedValue<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for round in 0..<25 {
                do {
                    let tree = try DirectoryWatcher.watchFolder(
                        path: roots[thread], options: .init(recursive: true, backend: .fanotify)
                    ) { _ in }
                    if round % 5 == 0 { _ = tree.watchedDirectories() }
                    tree.invalidate()
                } catch {
                    failures.update { $0.append("\(error)") }
                }
            }
        }
        stop.set(true)
        waitForDelivery(keeper)
        XCTAssertEqual(failures.get(), [])
        // The marks' mount descriptors go with their last tree, and the group with the last mark.
        // (Dispatch may open an eventfd of its own meanwhile: only ours are counted.)
        let after = ProcessResources.descriptorTargets()
        let opened = after.filter { descriptors[$0.key] != $0.value }
        XCTAssertEqual(opened.values.filter { !$0.hasPrefix("anon_inode:") }, [], "a mount descriptor left behind")
        XCTAssertEqual(
            after.values.filter { $0 == "anon_inode:[fanotify]" }.count, 0,
            ProcessResources.difference(from: descriptors, to: after))
        // A tree made after all that still sees its changes.
        try watch {
            try DirectoryWatcher.watchFolder(
                path: roots[0], options: .init(recursive: true, backend: .fanotify), delegate: $0)
        }
        directory.touch("t0/d9/last")
        XCTAssertTrue(delivered().contains(DirectoryChange(.created, directory.url("t0/d9/last"))))
    }
}
