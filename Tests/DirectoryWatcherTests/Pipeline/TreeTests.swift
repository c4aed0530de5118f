import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Recursive watching: every directory below the root, as it is and as it changes, with no race
/// between a new directory's creation and its watch. Through inotify here; the same tests run
/// through fanotify in ``FanotifyTreeTests``.
class TreeTests: WatchedDirectoryTestCase {
    /// The backend every tree of these tests is watched through.
    var backend: DirectoryWatcher.Backend { .inotify }
    var usesInotify: Bool { backend == .inotify }
    /// Small overflows made through the syscall table here; kernel-sized ones in the stress suite.
    var scale: Scale { .fast }

    /// Watches the tree on `loop`, or on the shared loop when nil.
    func watchTree(
        events: DirectoryWatcher.Events = .default, excludes: [String] = [], followsSymbolicLinks: Bool = false,
        loop: EventLoop? = nil
    ) throws {
        let options = DirectoryWatcher.Options(
            events: events, recursive: true, excludes: excludes, followsSymbolicLinks: followsSymbolicLinks,
            backend: backend)
        try watch {
            try DirectoryWatcher.make(path: directory.path, options: options, delegate: $0, queue: nil, loop: loop)
        }
        XCTAssertEqual(watcher.backendChoice?.kind, usesInotify ? .inotify : .fanotify)
    }

    func mkdir(_ name: String) {
        XCTAssertEqual(Glibc.mkdir(directory.url(name), 0o755), 0, "mkdir \(name): \(String(cString: strerror(errno)))")
    }

    func rename(_ from: String, _ to: String) {
        XCTAssertEqual(Glibc.rename(from, to), 0, "rename \(from) \(to): \(String(cString: strerror(errno)))")
    }

    func path(_ name: String) -> FileSystemPath { FileSystemPath(directory.url(name)) }

    /// The inotify watches a change in the tree adds or drops: none through marked.
    func watches(_ inotifyWatches: Int) -> Int { usesInotify ? inotifyWatches : 0 }

    /// Whether the directory is watched: through inotify, it has a kernel watch; through
    /// fanotify, it is a directory of the tree.
    func isWatched(_ name: String) -> Bool {
        if usesInotify { return ProcessResources.isWatched(directory.url(name)) }
        return watcher.watchedDirectories().contains(name.isEmpty ? FileSystemPath(directory.path) : path(name))
    }

    func testChangesDeepInATreeCarryTheirFullPath() throws {
        mkdir("a")
        mkdir("a/b")
        try watchTree()
        directory.touch("a/b/f")
        let created = delivered().filter { $0.kind == .created }
        XCTAssertEqual(created, [DirectoryChange(.created, directory.url("a/b/f"))])
    }

    /// A directory's own events seen from its parent (its attributes changed, opened, listed,
    /// closed) say that it is still there: its watch stays, and what happens in it is reported.
    func testADirectoryOpenedOrChangedInPlaceStaysWatched() throws {
        mkdir("a")
        mkdir("a/b")
        try watchTree(events: .all)
        XCTAssertEqual(chmod(directory.url("a"), 0o700), 0)
        _ = try FileManager.default.contentsOfDirectory(atPath: directory.url("a"))
        _ = delivered()
        XCTAssertEqual(
            Set(watcher.watchedDirectories()),
            Set([directory.path, directory.url("a"), directory.url("a/b")].map { FileSystemPath($0) }))
        directory.touch("a/b/f")
        XCTAssertTrue(delivered().contains(DirectoryChange(.created, directory.url("a/b/f"))))
    }

    /// notify issue 727, inotify-tools 160: files made in a new directory before its watch exists
    /// are lost by watchers that add the watch after the kernel reports the directory.
    func testFortyMkdirPInARowLoseNothing() throws {
        try watchTree()
        var expected: [FileSystemPath] = []
        for index in 0..<40 {
            mkdir("t\(index)")
            mkdir("t\(index)/b")
            mkdir("t\(index)/b/c")
            directory.touch("t\(index)/b/c/f")
            expected += ["t\(index)", "t\(index)/b", "t\(index)/b/c", "t\(index)/b/c/f"].map(path)
        }
        let created = delivered().filter { $0.kind == .created }.map(\.path)
        // Each exactly once: what the listing of a new directory found is not reported again
        // when the kernel's event for it follows.
        XCTAssertEqual(created.count, expected.count, "\(created.count) reported")
        XCTAssertEqual(Set(created), Set(expected))
        XCTAssertEqual(created.count, Set(created).count, "some reported twice")
        // A parent comes before what is in it.
        for (position, changed) in created.enumerated() {
            let parent = FileSystemPath(bytes: changed.bytes[..<changed.bytes.lastIndex(of: 0x2F)!])
            if let parentPosition = created.firstIndex(of: parent) { XCTAssertLessThan(parentPosition, position) }
        }
    }

    func testASubtreeRenamedKeepsItsWatchesAndLaterChangesCarryTheNewPath() throws {
        mkdir("a")
        mkdir("a/b")
        try watchTree()
        let watches = ProcessResources.kernelWatches()
        rename(directory.url("a"), directory.url("z"))
        directory.touch("z/b/f")
        XCTAssertEqual(
            delivered().filter { $0.kind != .attributesChanged && $0.kind != .modified },
            [
                DirectoryChange(.renamed, directory.url("z"), from: directory.url("a"), directory: true),
                DirectoryChange(.created, directory.url("z/b/f")),
            ])
        XCTAssertEqual(ProcessResources.kernelWatches(), watches, "a rename adds or drops no kernel watch")
    }

    func testASubtreeMovedInFromOutsideIsWatchedAndItsEntriesReported() throws {
        let outside = TemporaryDirectory()
        XCTAssertEqual(Glibc.mkdir(outside.url("m"), 0o755), 0)
        XCTAssertEqual(Glibc.mkdir(outside.url("m/y"), 0o755), 0)
        outside.touch("m/y/f1")
        try watchTree()
        rename(outside.url("m"), directory.url("m"))
        XCTAssertEqual(
            delivered(),
            [
                DirectoryChange(.movedIn, directory.url("m"), directory: true),
                DirectoryChange(.created, directory.url("m/y"), directory: true),
                DirectoryChange(.created, directory.url("m/y/f1")),
            ])
        directory.touch("m/y/f2")
        XCTAssertEqual(delivered().filter { $0.kind == .created }, [DirectoryChange(.created, directory.url("m/y/f2"))])
    }

    /// Runs `body` once, the first time a tree directory whose path ends with `suffix` is opened
    /// (just before), or, `whenWatched`, watched through its descriptor (just after): a rename made
    /// there falls between two steps of the walk, at the worst moment.
    func calls(
        renamingAt suffix: String, whenWatched: Bool = false, _ body: @escaping @Sendable () -> Void
    ) -> SystemCalls {
        let done = LockedValue(false)
        let once: @Sendable (String) -> Void = { path in
            guard path.hasSuffix(suffix), !done.get() else { return }
            done.set(true)
            body()
        }
        var calls = SystemCalls.live
        let live = SystemCalls.live
        calls.openDirectory = { path, noFollow in
            if !whenWatched { once(String(cString: path)) }
            return live.openDirectory(path, noFollow)
        }
        calls.inotifyAddWatch = { fd, path, mask in
            var target = [UInt8](repeating: 0, count: Int(PATH_MAX))
            let length = readlink(path, &target, target.count)
            let wd = live.inotifyAddWatch(fd, path, mask)
            if whenWatched, length > 0 { once(String(decoding: target[..<length], as: UTF8.self)) }
            return wd
        }
        return calls
    }

    func watchTree(on calls: SystemCalls) throws -> EventLoop {
        let loop = try EventLoop(system: System(calls))
        try watch {
            try DirectoryWatcher.make(
                path: directory.path, options: DirectoryWatcher.Options(recursive: true, backend: backend),
                delegate: $0,
                queue: nil, loop: loop)
        }
        return loop
    }

    /// A directory renamed between its watch and its listing is listed all the same: the watch
    /// and the listing are of the directory opened, not of a path. Its subdirectories, whose
    /// paths the rename changed, are watched at their new paths once the rename's event comes.
    func testADirectoryRenamedWhileTheTreeIsWalkedIsWatchedWhole() throws {
        for made in ["a", "a/x", "a/x/y"] { mkdir(made) }
        let (from, to) = (directory.url("a/x"), directory.url("a/z"))
        for whenWatched in [true, false] {
            let loop = try watchTree(
                on: calls(renamingAt: "/a/x", whenWatched: whenWatched) { _ = Glibc.rename(from, to) })
            defer {
                watcher.invalidate()
                loop.shutdown()
                rename(to, from)
            }
            XCTAssertEqual(delivered(), [DirectoryChange(.renamed, to, from: from, directory: true)])
            XCTAssertEqual(
                Set(watcher.watchedDirectories()),
                Set([directory.path, directory.url("a"), to, directory.url("a/z/y")].map { FileSystemPath($0) }))
            directory.touch("a/z/y/f")
            XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/z/y/f"))])
            XCTAssertEqual(unlink(directory.url("a/z/y/f")), 0)
        }
    }

    /// A tree outside the watched one, to move in: `out/x/y/report.txt`.
    func outsideTree() -> TemporaryDirectory {
        let outside = TemporaryDirectory()
        for made in ["out", "out/x", "out/x/y"] { XCTAssertEqual(Glibc.mkdir(outside.url(made), 0o755), 0) }
        outside.touch("out/x/y/report.txt")
        return outside
    }

    /// A tree moved in whose directory is renamed while it is walked: what was in the renamed
    /// directory's subdirectory is reported, under its new path, once the rename's event comes.
    func testATreeMovedInAndRenamedWhileItIsWalkedLosesNothing() throws {
        let outside = outsideTree()
        let (from, to) = (directory.url("out/x"), directory.url("out/z"))
        let loop = try watchTree(on: calls(renamingAt: "/out/x/y") { _ = Glibc.rename(from, to) })
        defer { loop.shutdown() }
        rename(outside.url("out"), directory.url("out"))
        // The rename is made inside the walk, which may come after the barrier was written.
        XCTAssertEqual(
            delivered() + delivered(),
            [
                DirectoryChange(.movedIn, directory.url("out"), directory: true),
                DirectoryChange(.created, from, directory: true),
                DirectoryChange(.created, directory.url("out/x/y"), directory: true),
                DirectoryChange(.renamed, to, from: from, directory: true),
                DirectoryChange(.created, directory.url("out/z/y/report.txt")),
            ])
        directory.touch("out/z/y/later")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("out/z/y/later"))])
    }

    /// A rename inside a directory after its watch and before its listing: the listing shows
    /// the new name, reported as created; the kernel's event for the rename, queued since the
    /// watch, is a repeat of what the listing showed, and is not reported again.
    func testARenameTheListingAlreadyShowsIsNotReportedAgain() throws {
        let outside = outsideTree()
        let (from, to) = (directory.url("out/x"), directory.url("out/z"))
        let loop = try watchTree(on: calls(renamingAt: "/out", whenWatched: true) { _ = Glibc.rename(from, to) })
        defer { loop.shutdown() }
        rename(outside.url("out"), directory.url("out"))
        XCTAssertEqual(
            delivered() + delivered(),
            [
                DirectoryChange(.movedIn, directory.url("out"), directory: true),
                DirectoryChange(.created, to, directory: true),
                DirectoryChange(.created, directory.url("out/z/y"), directory: true),
                DirectoryChange(.created, directory.url("out/z/y/report.txt")),
            ])
    }

    /// Runs `hooks[path]` once, on the loop's thread, just after the tree directory at `path` is
    /// watched and before it is listed.
    func calls(whenWatched hooks: [String: @Sendable () -> Void]) -> SystemCalls {
        var calls = SystemCalls.live
        let live = SystemCalls.live
        let done = LockedValue<Set<String>>([])
        calls.inotifyAddWatch = { fd, path, mask in
            var target = [UInt8](repeating: 0, count: Int(PATH_MAX))
            let length = readlink(path, &target, target.count)
            let wd = live.inotifyAddWatch(fd, path, mask)
            let watched = length > 0 ? String(decoding: target[..<length], as: UTF8.self) : ""
            var first = false
            done.update { first = $0.insert(watched).inserted }
            if first, let hook = hooks[watched] { hook() }
            return wd
        }
        return calls
    }

    /// What was delivered, applied to a model of the tree as it was when watching began, against
    /// the disk: nil when the two agree. `rounds`: barriers to wait for (changes a walk makes come
    /// after the barrier that follows the change that began it).
    func differencesFromTheDisk(startingFrom entries: [String: Bool] = [:], rounds: Int = 1) -> String? {
        var model = TreeModel(root: directory.path, entries: entries)
        let changes = (0..<rounds).flatMap { _ in delivered() }
        let problems = model.apply(changes)
        return model.differences(problems).map {
            "\($0)\nchanges:\n\(changes.map(\.description).joined(separator: "\n"))"
        }
    }

    /// A directory moved into a new directory between that directory's watch and its listing,
    /// then the new directory renamed before the move's event is read (the tree soak's seed
    /// 2128936974 under ThreadSanitizer): the listing showed the arrival and the walk reported
    /// what it holds. The event's path is stale, so the repeat cannot be confirmed by the disk;
    /// reported as a move in, which tells a consumer to forget what it knew there, it must be
    /// followed by what the directory holds again, or the file is lost to the consumer.
    func testAMoveInTheListingShowedUnderADirectoryRenamedSinceLosesNothing() throws {
        try XCTSkipUnless(usesInotify, "the moment between a watch and a listing is an inotify tree's")
        let outside = TemporaryDirectory()
        XCTAssertEqual(Glibc.mkdir(outside.url("d"), 0o755), 0)
        outside.touch("d/f")
        let (p, r) = (directory.url("p"), directory.url("r"))
        let loop = try watchTree(
            on: calls(whenWatched: [
                // p is watched: the move's event is queued on it, and its listing shows m.
                p: { _ = Glibc.rename(outside.url("d"), p + "/m") },
                // m is watched (and listed next, f with it): p renamed before the move's event
                // is read, whose path no longer leads anywhere.
                p + "/m": { _ = Glibc.rename(p, r) },
            ]))
        defer { loop.shutdown() }
        mkdir("p")
        XCTAssertNil(differencesFromTheDisk(rounds: 2))
        directory.touch("r/m/later")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("r/m/later"))])
    }

    /// The same, the ancestor renamed into a directory made just before, not watched yet (the
    /// tree soak's seed 2128936960): the move's event, read first, is reported as a move in and
    /// its path no longer leads anywhere; the new directory's walk then meets the ancestor there
    /// and reports all it holds, the moved directory's entries with it. Those are reported once:
    /// its entries owed since the move in are among them.
    func testAMoveInTheListingShowedUnderADirectoryRenamedIntoANewOneIsReportedOnce() throws {
        try XCTSkipUnless(usesInotify, "the moment between a watch and a listing is an inotify tree's")
        let outside = TemporaryDirectory()
        XCTAssertEqual(Glibc.mkdir(outside.url("m"), 0o755), 0)
        outside.touch("m/f")
        let (p, n) = (directory.url("p"), directory.url("n"))
        let loop = try watchTree(
            on: calls(whenWatched: [
                // p is watched: d made in it, which its listing shows.
                p: { _ = Glibc.mkdir(p + "/d", 0o755) },
                // d is watched: the move's event is queued on it, and its listing shows m.
                p + "/d": { _ = Glibc.rename(outside.url("m"), p + "/d/m") },
                // m is watched (and listed next, f with it): p renamed into directories made
                // now, before the move's event is read.
                p + "/d/m": {
                    _ = Glibc.mkdir(n, 0o755)
                    _ = Glibc.mkdir(n + "/s", 0o755)
                    _ = Glibc.rename(p, n + "/s/r")
                },
            ]))
        defer { loop.shutdown() }
        mkdir("p")
        XCTAssertNil(differencesFromTheDisk(rounds: 2))
        directory.touch("n/s/r/d/m/later")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("n/s/r/d/m/later"))])
    }

    /// A directory of the tree renamed into a new directory between that directory's watch and
    /// its listing, then the new directory renamed before the move's events are read: the walk
    /// met the directory at its new name (its node follows it there) and reported it with what
    /// it holds. The disk cannot confirm the arrival (its path leads nowhere since the rename);
    /// it was said all the same, and the departure alone is news. (Reported as a rename, then
    /// what it holds once more at the new path, each file came twice.)
    func testADirectoryRenamedIntoANewOneRenamedSinceIsReportedOnce() throws {
        try XCTSkipUnless(usesInotify, "the moment between a watch and a listing is an inotify tree's")
        mkdir("a")
        mkdir("a/x")
        directory.touch("a/x/f")
        let (a, n, r) = (directory.url("a"), directory.url("n"), directory.url("r"))
        let loop = try watchTree(
            on: calls(whenWatched: [
                // n is watched: its listing shows y, and x, which the tree knows in a.
                n: {
                    _ = Glibc.mkdir(n + "/y", 0o755)
                    _ = Glibc.rename(a + "/x", n + "/x")
                },
                // y is watched (after n's listing): n renamed before the move's events are read.
                n + "/y": { _ = Glibc.rename(n, r) },
            ]))
        defer { loop.shutdown() }
        mkdir("n")
        XCTAssertNil(differencesFromTheDisk(startingFrom: ["a": true, "a/x": true, "a/x/f": false], rounds: 2))
        directory.touch("r/x/later")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("r/x/later"))])
    }

    /// A directory moved in over an empty directory of the tree (a rename may replace one): the
    /// arrival is watched and what it holds reported, and the one it replaced is let go.
    func testADirectoryMovedInOverAnEmptyOneIsWatchedAndReported() throws {
        let outside = TemporaryDirectory()
        XCTAssertEqual(Glibc.mkdir(outside.url("d"), 0o755), 0)
        outside.touch("d/f")
        mkdir("a")
        try watchTree()
        rename(outside.url("d"), directory.url("a"))
        XCTAssertNil(differencesFromTheDisk(startingFrom: ["a": true]))
        directory.touch("a/later")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/later"))])
        XCTAssertEqual(
            Set(watcher.watchedDirectories()), Set([directory.path, directory.url("a")].map { FileSystemPath($0) }))
    }

    /// A directory of the tree renamed over an empty one: followed there, and the one it replaced
    /// let go.
    func testADirectoryRenamedOverAnEmptyOneIsFollowed() throws {
        mkdir("a")
        mkdir("b")
        directory.touch("b/f")
        try watchTree()
        rename(directory.url("b"), directory.url("a"))
        XCTAssertNil(differencesFromTheDisk(startingFrom: ["a": true, "b": true, "b/f": false]))
        directory.touch("a/later")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/later"))])
        XCTAssertEqual(
            Set(watcher.watchedDirectories()), Set([directory.path, directory.url("a")].map { FileSystemPath($0) }))
    }

    func testASubtreeMovedOutIsLetGoAndNothingBelowItIsReported() throws {
        let outside = TemporaryDirectory()
        mkdir("a")
        mkdir("a/b")
        try watchTree()
        let watches = ProcessResources.kernelWatches()
        rename(directory.url("a"), outside.url("a"))
        XCTAssertEqual(delivered(), [DirectoryChange(.movedOut, directory.url("a"), directory: true)])
        XCTAssertEqual(Glibc.mkdir(outside.url("a/b/new"), 0o755), 0)
        outside.touch("a/b/f")
        outside.touch("a/g")
        XCTAssertEqual(delivered(), [])
        XCTAssertEqual(
            ProcessResources.kernelWatches(), watches - self.watches(2), "the watches of a and a/b are let go")
    }

    func testARemovedSubtreeIsLetGo() throws {
        mkdir("a")
        mkdir("a/b")
        try watchTree()
        let watches = ProcessResources.kernelWatches()
        try FileManager.default.removeItem(atPath: directory.url("a"))
        let changes = delivered()
        XCTAssertEqual(changes.last, DirectoryChange(.removed, directory.url("a"), directory: true))
        XCTAssertFalse(changes.contains { $0.kind == .rootRemoved }, "\(changes)")
        XCTAssertEqual(ProcessResources.kernelWatches(), watches - self.watches(2), "the watches of a and a/b are gone")
        mkdir("a")
        directory.touch("a/f")
        XCTAssertEqual(
            delivered().filter { $0.kind == .created },
            [
                DirectoryChange(.created, directory.url("a"), directory: true),
                DirectoryChange(.created, directory.url("a/f")),
            ])
    }

    func testAWatcherOfOnlyNewEntriesStillFollowsNewDirectories() throws {
        try watchTree(events: [.created])
        mkdir("a")
        mkdir("a/b")
        directory.touch("a/b/f")
        XCTAssertEqual(
            Set(delivered().map(\.path)), Set(["a", "a/b", "a/b/f"].map(path)))
    }

    func testADirectoryMovedToAnotherDirectoryOfTheTreeIsFollowed() throws {
        mkdir("a")
        mkdir("a/b")
        mkdir("c")
        try watchTree()
        rename(directory.url("a/b"), directory.url("c/b"))
        directory.touch("c/b/f")
        XCTAssertEqual(
            delivered().filter { $0.kind == .renamed || $0.kind == .created },
            [
                DirectoryChange(.renamed, directory.url("c/b"), from: directory.url("a/b"), directory: true),
                DirectoryChange(.created, directory.url("c/b/f")),
            ])
        XCTAssertEqual(
            Set(watcher.watchedDirectories()),
            Set(
                [directory.path, directory.url("a"), directory.url("c"), directory.url("c/b")].map {
                    FileSystemPath($0)
                }))
    }

    /// Watches the tree a, a/`name`, a/`name`/below, b on a loop whose system calls are `calls`
    /// (a failure injected for a/`name`), makes b/f, and returns what was delivered: the notices
    /// and the files created. The loop lives until `check` returns.
    func watchTree(
        failingAt name: String, calls: SystemCalls,
        check: (_ notices: [DirectoryChange], _ created: [DirectoryChange]) -> Void
    ) throws {
        for made in ["a", "a/\(name)", "a/\(name)/below", "b"] { mkdir(made) }
        let loop = try EventLoop(system: System(calls))
        defer { loop.shutdown() }
        try watch {
            try DirectoryWatcher.make(
                path: directory.path, options: DirectoryWatcher.Options(recursive: true, backend: backend),
                delegate: $0,
                queue: nil, loop: loop)
        }
        directory.touch("b/f")
        let changes = delivered()
        check(changes.filter { $0.kind == .failed }, changes.filter { $0.kind == .created })
    }

    /// `ENOSPC` from `inotify_add_watch` part-way through a tree: the watcher is told which
    /// directory is not watched and why, and goes on with the rest.
    func testTheWatchLimitReachedPartWayIsReportedAndTheRestIsWatched() throws {
        // A tree's directory is watched through its open descriptor (/proc/self/fd/N).
        let calls = SystemCalls.live.failing(\.inotifyAddWatch, errno: ENOSPC) { _, path, _ in
            var target = [UInt8](repeating: 0, count: Int(PATH_MAX))
            let length = readlink(path, &target, target.count)
            return length > 0 && String(decoding: target[..<length], as: UTF8.self).hasSuffix("/deep")
        }
        try watchTree(failingAt: "deep", calls: calls) { notices, created in
            XCTAssertEqual(notices.map(\.path), [path("a/deep")])
            XCTAssertEqual(notices.first?.error?.code, .watchLimitReached)
            let message = notices.first?.error?.description ?? ""
            XCTAssertTrue(message.contains("fs.inotify.max_user_watches"), message)
            // How far it got, and the limit (read from /proc).
            XCTAssertTrue(message.contains("3 directories of this tree are watched; the limit is "), message)
            XCTAssertEqual(created, [DirectoryChange(.created, directory.url("b/f"))])
            XCTAssertEqual(
                Set(watcher.watchedDirectories()),
                Set([directory.path, directory.url("a"), directory.url("b")].map { FileSystemPath($0) }))
        }
    }

    /// `ENOSPC` for many directories at once (injected for every directory named `full-N`): four
    /// at start, 35 of the 70 subdirectories of a tree moved in (a level walked on every core),
    /// and ten made while the loop is held up, so that their events are read in one wake-up. One
    /// notice for each, naming one of them, saying how many could not be watched, and how many
    /// are: as many as ``DirectoryWatcher/watchedDirectories()`` lists then. Through fanotify, no
    /// notice, and every directory watched. (Issue 26: one notice per directory, 2,053 of them
    /// under a lowered limit, with counts of directories watched that disagreed.)
    func testTheWatchLimitReachedForManyDirectoriesAtOnceIsOneNoticeWithOneCount() throws {
        let calls = SystemCalls.live.failing(\.inotifyAddWatch, errno: ENOSPC) { _, path, _ in
            var target = [UInt8](repeating: 0, count: Int(PATH_MAX))
            let length = readlink(path, &target, target.count)
            guard length > 0 else { return false }
            return String(decoding: target[..<length], as: UTF8.self).split(separator: "/").last?
                .hasPrefix("full-") ?? false
        }
        let loop = try EventLoop(system: System(calls))
        defer {
            watcher?.invalidate()
            loop.shutdown()
        }
        for index in 0..<4 {
            mkdir("full-\(index)")
            mkdir("full-\(index)/below")
        }
        mkdir("fine")
        try watchTree(loop: loop)
        /// The one notice expected of an occasion with `unwatched` directories refused, whose paths
        /// start with `prefix`.
        func check(_ changes: [DirectoryChange], unwatched: Int, prefix: String, line: UInt = #line) {
            let notices = changes.filter { $0.kind == .failed }
            guard usesInotify else { return XCTAssertEqual(notices, [], line: line) }
            XCTAssertEqual(notices.count, 1, "\(notices)", line: line)
            guard let notice = notices.first else { return }
            XCTAssertTrue(notice.path.description.hasPrefix(directory.url(prefix)), "\(notice)", line: line)
            XCTAssertEqual(notice.error?.code, .watchLimitReached, line: line)
            let message = notice.error?.description ?? ""
            let watched = watcher.watchedDirectories().count
            XCTAssertTrue(
                message.contains(
                    "this directory and \(unwatched - 1) others of this tree could not be watched; "
                        + "\(watched) directories of this tree are watched; the limit is "), message, line: line)
        }
        check(delivered(), unwatched: 4, prefix: "full-")
        XCTAssertEqual(watcher.watchedDirectories().count, usesInotify ? 2 : 10)

        let outside = TemporaryDirectory()
        XCTAssertEqual(Glibc.mkdir(outside.url("m"), 0o755), 0)
        var expected: Set<FileSystemPath> = []
        for index in 0..<35 {
            for name in ["full-\(index)", "fine-\(index)"] {
                XCTAssertEqual(Glibc.mkdir(outside.url("m/\(name)"), 0o755), 0)
                outside.touch("m/\(name)/f")
                expected.insert(path("m/\(name)"))
                // What is in a directory not watched is not reported.
                if name.hasPrefix("fine") || !usesInotify { expected.insert(path("m/\(name)/f")) }
            }
        }
        rename(outside.url("m"), directory.url("m"))
        var changes = delivered()
        check(changes, unwatched: 35, prefix: "m/full-")
        XCTAssertEqual(Set(changes.filter { $0.kind == .created }.map(\.path)), expected)
        XCTAssertEqual(watcher.watchedDirectories().count, usesInotify ? 2 + 1 + 35 : 10 + 1 + 70)

        let staller = try Staller(test: self, loop: loop)
        for index in 0..<10 { mkdir("m/full-new-\(index)") }
        staller.resume()
        changes = delivered()
        check(changes, unwatched: 10, prefix: "m/full-new-")
        XCTAssertEqual(changes.filter { $0.kind == .created }.count, 10)
    }

    /// Directories made while the kernel dropped events: the rescan finds them, watches them and
    /// reports what is in them; later changes inside them are seen as they happen.
    func testDirectoriesMadeWhileEventsWereLostAreFoundWatchedAndReported() throws {
        let loss = try QueueLoss(scale, fanotify: !usesInotify)
        defer {
            watcher?.invalidate()
            loss.shutdown()
        }
        try watchTree(loop: loss.loop)
        try loss.lose(test: self, fillers: directory) {
            mkdir("d")
            mkdir("d/e")
            directory.touch("d/e/f")
        }
        let changes = delivered()
        XCTAssertTrue(changes.contains { $0.kind == .overflow })
        let found = changes.filter { $0.kind == .created && !$0.path.description.contains("filler-") }
        XCTAssertEqual(Set(found.map(\.path)), Set(["d", "d/e", "d/e/f"].map(path)))
        XCTAssertEqual(found.count, 3, "\(found)")
        XCTAssertTrue(found.allSatisfy(\.foundByRescan))
        directory.touch("d/e/g")
        XCTAssertEqual(delivered().filter { $0.kind == .created }, [DirectoryChange(.created, directory.url("d/e/g"))])
    }

    /// Directories removed and renamed while the kernel dropped events: the rescan finds each of
    /// them gone from its path. That is the subdirectory's end, never the root's: the watch goes
    /// on, a renamed directory is listed at its new path (what changed in it meanwhile is
    /// reported), a removed one is reported removed. (Many of them, so that some are listed again
    /// before their parent whatever order the rescan takes.)
    func testDirectoriesRemovedOrRenamedWhileEventsWereLostEndOnlyThemselves() throws {
        for index in 0..<12 {
            mkdir("gone\(index)")
            mkdir("gone\(index)/inner")
            mkdir("old\(index)")
            directory.touch("old\(index)/kept")
        }
        mkdir("keep")
        // Born before the first listing's tick, so that listing vouches for their inodes and the
        // rescan can follow a renamed directory by its inode.
        RescanTests.waitForTheBirthClockToTick()
        let loss = try QueueLoss(scale, fanotify: !usesInotify)
        defer {
            watcher?.invalidate()
            loss.shutdown()
        }
        try watchTree(loop: loss.loop)
        _ = watcher.watchedDirectories()
        try loss.lose(test: self, fillers: directory) {
            for index in 0..<12 {
                XCTAssertEqual(Glibc.rmdir(directory.url("gone\(index)/inner")), 0)
                XCTAssertEqual(Glibc.rmdir(directory.url("gone\(index)")), 0)
                rename(directory.url("old\(index)"), directory.url("new\(index)"))
                directory.touch("new\(index)/made")
            }
            directory.touch("keep/f")
        }
        let changes = delivered().filter { !$0.path.description.contains("/filler-") }
        XCTAssertFalse(changes.contains { $0.kind == .rootRemoved }, "the root is still there: \(changes)")
        XCTAssertTrue(changes.contains { $0.kind == .overflow })
        for index in 0..<12 {
            XCTAssertTrue(
                changes.contains { $0.kind == .removed && $0.path == path("gone\(index)") && $0.isDirectory },
                "gone\(index) removed: \(changes)")
            XCTAssertTrue(
                changes.contains {
                    $0.kind == .renamed && $0.path == path("new\(index)") && $0.oldPath == path("old\(index)")
                }, "old\(index) renamed: \(changes)")
            XCTAssertTrue(
                changes.contains { $0.kind == .created && $0.path == path("new\(index)/made") && $0.foundByRescan },
                "new\(index)/made: \(changes)")
        }
        XCTAssertTrue(changes.contains { $0.kind == .created && $0.path == path("keep/f") })
        // And it goes on, below the renamed directories too.
        directory.touch("keep/later")
        directory.touch("new3/later")
        XCTAssertEqual(
            Set(delivered().filter { $0.kind == .created }.map(\.path)), Set([path("keep/later"), path("new3/later")]))
    }

    /// notify 204, inotify-tools 33: an excluded tree still costs kernel watches elsewhere.
    func testExcludedDirectoriesCostNoKernelWatchAndReportNothing() throws {
        for name in ["a", "node_modules", "node_modules/x", "a/.git", "a/.git/objects"] { mkdir(name) }
        try watchTree(excludes: ["node_modules", ".git", "*.tmp"])
        XCTAssertTrue(isWatched(""))
        XCTAssertTrue(isWatched("a"))
        for excluded in ["node_modules", "node_modules/x", "a/.git", "a/.git/objects"] {
            XCTAssertFalse(isWatched(excluded), "\(excluded) is watched")
        }
        directory.touch("node_modules/x/f")
        directory.touch("a/.git/objects/f")
        directory.touch("a/scratch.tmp")
        mkdir("a/b")
        mkdir("a/b/.git")
        directory.touch("a/b/f")
        XCTAssertEqual(
            delivered().filter { $0.kind == .created },
            [
                DirectoryChange(.created, directory.url("a/b"), directory: true),
                DirectoryChange(.created, directory.url("a/b/f")),
            ])
        XCTAssertFalse(isWatched("a/b/.git"))
        // Renamed to an excluded name, a directory is let go; renamed back, it is watched again.
        rename(directory.url("a/b"), directory.url("a/node_modules"))
        _ = delivered()
        XCTAssertFalse(isWatched("a/node_modules"))
        rename(directory.url("a/node_modules"), directory.url("a/c"))
        _ = delivered()
        XCTAssertTrue(isWatched("a/c"))
        directory.touch("a/c/g")
        XCTAssertEqual(delivered().filter { $0.kind == .created }, [DirectoryChange(.created, directory.url("a/c/g"))])
    }

    func testSymbolicLinksAreNotFollowedByDefault() throws {
        let outside = TemporaryDirectory()
        XCTAssertEqual(Glibc.mkdir(outside.url("d"), 0o755), 0)
        XCTAssertEqual(symlink(outside.url("d"), directory.url("link")), 0)
        XCTAssertEqual(symlink("..", directory.url("up")), 0)
        try watchTree()
        XCTAssertFalse(ProcessResources.isWatched(outside.url("d")))
        outside.touch("d/f")
        XCTAssertEqual(delivered(), [])
        XCTAssertEqual(watcher.watchedDirectories(), [FileSystemPath(directory.path)])
    }

    /// Followed, a link loop does not hang the walk, and a directory reached twice is watched
    /// once: each change in it is reported once, under the path it was reached by first.
    func testFollowedLinksWatchWhatTheyLeadToOnceEvenInALoop() throws {
        let outside = TemporaryDirectory()
        XCTAssertEqual(Glibc.mkdir(outside.url("d"), 0o755), 0)
        mkdir("a")
        XCTAssertEqual(symlink(outside.url("d"), directory.url("a/link")), 0)
        XCTAssertEqual(symlink(outside.url("d"), directory.url("a/second")), 0)
        XCTAssertEqual(symlink("..", directory.url("a/up")), 0)
        XCTAssertEqual(symlink(directory.path, outside.url("d/back")), 0)
        try watchTree(followsSymbolicLinks: true)
        XCTAssertTrue(ProcessResources.isWatched(outside.url("d")))
        XCTAssertEqual(watcher.watchedDirectories().count, 3, "\(watcher.watchedDirectories())")
        outside.touch("d/f")
        directory.touch("a/g")
        let created = delivered().filter { $0.kind == .created }.map(\.path)
        XCTAssertEqual(created.count, 2, "\(created)")
        XCTAssertTrue(created.contains(path("a/g")))
        XCTAssertTrue(created.contains(path("a/link/f")) || created.contains(path("a/second/f")), "\(created)")
    }

    func testAFollowedLinkMadeOrRemovedWhileWatchingIsWatchedOrLetGo() throws {
        let outside = TemporaryDirectory()
        XCTAssertEqual(Glibc.mkdir(outside.url("d"), 0o755), 0)
        outside.touch("d/inside")
        try watchTree(followsSymbolicLinks: true)
        XCTAssertEqual(symlink(outside.url("d"), directory.url("link")), 0)
        XCTAssertEqual(
            delivered().filter { $0.kind == .created },
            [DirectoryChange(.created, directory.url("link")), DirectoryChange(.created, directory.url("link/inside"))])
        XCTAssertTrue(ProcessResources.isWatched(outside.url("d")))
        XCTAssertEqual(unlink(directory.url("link")), 0)
        _ = delivered()
        XCTAssertFalse(ProcessResources.isWatched(outside.url("d")))
        outside.touch("d/later")
        XCTAssertEqual(delivered(), [])
    }

    /// A level of 64 directories or more is watched and listed on every core: the same tree, the
    /// same reports, whatever thread made each system call.
    func testALargeTreeIsWatchedWholeAndAMovedInOneReportedWhole() throws {
        for top in 0..<80 {
            mkdir("t\(top)")
            for below in 0..<2 { mkdir("t\(top)/d\(below)") }
        }
        try watchTree()
        XCTAssertEqual(watcher.watchedDirectories().count, 1 + 80 + 160)
        directory.touch("t79/d1/f")
        XCTAssertEqual(
            delivered().filter { $0.kind == .created }, [DirectoryChange(.created, directory.url("t79/d1/f"))])

        let outside = TemporaryDirectory()
        var expected: Set<FileSystemPath> = []
        XCTAssertEqual(Glibc.mkdir(outside.url("m"), 0o755), 0)
        for top in 0..<70 {
            XCTAssertEqual(Glibc.mkdir(outside.url("m/u\(top)"), 0o755), 0)
            outside.touch("m/u\(top)/f")
            expected.formUnion([path("m/u\(top)"), path("m/u\(top)/f")])
        }
        rename(outside.url("m"), directory.url("m"))
        let created = delivered().filter { $0.kind == .created }.map(\.path)
        XCTAssertEqual(created.count, expected.count)
        XCTAssertEqual(Set(created), expected)
        XCTAssertEqual(watcher.watchedDirectories().count, 1 + 80 + 160 + 1 + 70)
    }

    /// An unreadable directory part-way (root reads anything, so the refusal is injected): the
    /// watcher is told which and why, and the rest of the tree is watched.
    func testAnUnreadableSubdirectoryIsReportedAndSkipped() throws {
        let calls = SystemCalls.live.failing(\.openDirectory, errno: EACCES) { path, _ in
            String(cString: path).hasSuffix("/secret")
        }
        try watchTree(failingAt: "secret", calls: calls) { notices, created in
            XCTAssertEqual(notices.map(\.path), [path("a/secret")])
            XCTAssertEqual(notices.first?.error?.code, .permissionDenied)
            XCTAssertEqual(created, [DirectoryChange(.created, directory.url("b/f"))])
            XCTAssertFalse(watcher.watchedDirectories().contains(path("a/secret/below")))
        }
    }

    /// The unreadable subdirectory made readable: the injection stops, then a `chmod`, which its
    /// parent's watch reports (`IN_ATTRIB`). It is watched and listed, and what it holds (a file
    /// made while it was unreadable too) is reported as created, once, as for a directory moved
    /// in; what is made in it later is reported. A `chmod` that leaves it unreadable says nothing
    /// more. (Issue 26: after `chmod 755` it was never watched, and nothing below it reported.)
    func testAnUnreadableSubdirectoryMadeReadableIsWatchedAndWhatItHoldsReported() throws {
        let refusing = LockedValue(true)
        let calls = SystemCalls.live.failing(\.openDirectory, errno: EACCES) { path, _ in
            refusing.get() && String(cString: path).hasSuffix("/secret")
        }
        try watchTree(failingAt: "secret", calls: calls) { notices, _ in
            XCTAssertEqual(notices.map(\.path), [path("a/secret")])
            directory.touch("a/secret/kept")
            let attributes = DirectoryChange(.attributesChanged, directory.url("a/secret"), directory: true)
            XCTAssertEqual(chmod(directory.url("a/secret"), 0o700), 0)
            XCTAssertEqual(delivered(), [attributes])
            refusing.set(false)
            XCTAssertEqual(chmod(directory.url("a/secret"), 0o755), 0)
            let changes = delivered()
            XCTAssertEqual(changes.first, attributes)
            XCTAssertEqual(
                changes.dropFirst().sorted { $0.path.description < $1.path.description },
                [
                    DirectoryChange(.created, directory.url("a/secret/below"), directory: true),
                    DirectoryChange(.created, directory.url("a/secret/kept")),
                ])
            XCTAssertTrue(watcher.watchedDirectories().contains(path("a/secret/below")))
            directory.touch("a/secret/below/g")
            XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/secret/below/g"))])
        }
    }

    /// A watched directory made unreadable (injected: what is below it cannot be opened, as
    /// after `chmod 0` for a user other than root): its watch stays, and its events keep coming.
    /// A directory made in it meanwhile cannot be watched, and the watcher is told so; once the
    /// directory is readable again (a `chmod`), that one is watched and what it holds reported,
    /// once. Through fanotify nothing is refused: the mark sees the new directory, and its file
    /// comes as its own event.
    func testADirectoryMadeUnreadableWhileWatchedLosesNothingOnceReadableAgain() throws {
        mkdir("a")
        mkdir("a/open")
        let refusing = LockedValue(false)
        let calls = SystemCalls.live.failing(\.openDirectory, errno: EACCES) { path, _ in
            refusing.get() && String(cString: path).contains("/a/open/")
        }
        let loop = try EventLoop(system: System(calls))
        defer { loop.shutdown() }
        try watchTree(loop: loop)
        refusing.set(true)
        // Through either backend: fanotify's record names the directory itself, and the router
        // reports it as inotify's parent watch does, by its name.
        let attributes = [DirectoryChange(.attributesChanged, directory.url("a/open"), directory: true)]
        XCTAssertEqual(chmod(directory.url("a/open"), 0o700), 0)
        directory.touch("a/open/f")
        mkdir("a/open/new")
        directory.touch("a/open/new/g")
        var changes = delivered()
        XCTAssertEqual(
            changes.filter { $0.kind != .failed },
            attributes + [
                DirectoryChange(.created, directory.url("a/open/f")),
                DirectoryChange(.created, directory.url("a/open/new"), directory: true),
            ] + (usesInotify ? [] : [DirectoryChange(.created, directory.url("a/open/new/g"))]))
        let notices = changes.filter { $0.kind == .failed }
        XCTAssertEqual(notices.map(\.path), usesInotify ? [path("a/open/new")] : [])
        XCTAssertEqual(notices.first?.error?.code, usesInotify ? .permissionDenied : nil)
        refusing.set(false)
        XCTAssertEqual(chmod(directory.url("a/open"), 0o755), 0)
        changes = delivered()
        XCTAssertEqual(
            changes, attributes + (usesInotify ? [DirectoryChange(.created, directory.url("a/open/new/g"))] : []))
        XCTAssertTrue(watcher.watchedDirectories().contains(path("a/open/new")))
        directory.touch("a/open/new/h")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, directory.url("a/open/new/h"))])
    }
}
