import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher
@testable import DirectoryWatcherTesting

/// Trees through the in-memory backend: the races of a directory made, filled, renamed and moved
/// while it has no watch yet, reproduced exactly (a change in a directory not watched is silent),
/// with no kernel and no thread. Each test applies what the watcher reported to a model of the
/// tree it started from and compares the model with the file system.
final class InMemoryTreeTests: XCTestCase {
    private var loop: InMemoryLoop!

    override func setUp() {
        loop = InMemoryLoop()
        loop.files.mkdirs("/t")
        loop.files.mkdirs("/out")
    }

    override func tearDown() {
        XCTAssertEqual(loop.files.openDescriptors, 0, "every directory opened is closed")
        loop = nil
    }

    private func watchTree(_ root: String = "/t") throws -> (Subscription, ChangeRecorder, TreeModel) {
        let model = TreeModel(root: root, entries: loop.files.tree(root))
        let (subscription, recorder) = try loop.watch(root, options: DirectoryWatcher.Options(recursive: true))
        return (subscription, recorder, model)
    }

    /// What the model, with every change reported applied, lacks or has too many of.
    private func check(
        _ model: TreeModel, _ recorder: ChangeRecorder, queueLost: Bool = false, file: StaticString = #filePath,
        line: UInt = #line
    ) {
        var model = model
        let problems = model.apply(recorder.changes, queueLost: queueLost)
        if let differences = model.differences(from: loop.files.tree(model.root), problems) {
            XCTFail("\(differences)\nreported: \(recorder.changes)", file: file, line: line)
        }
    }

    func testADirectoryMadeAndFilledBeforeItsWatchIsReportedWithWhatItHolds() throws {
        let (_, recorder, model) = try watchTree()
        // All made before the router reads the first event: only `a`'s creation is queued.
        loop.files.mkdirs("/t/a/b/c")
        loop.files.create("/t/a/b/c/f")
        loop.files.create("/t/a/g")
        XCTAssertEqual(loop.files.queued, 1)
        loop.runUntilIdle()
        XCTAssertEqual(
            Set(recorder.changes.map(\.path.description)), ["/t/a", "/t/a/b", "/t/a/b/c", "/t/a/b/c/f", "/t/a/g"])
        XCTAssertEqual(recorder.changes.count, 5, "each once: \(recorder.changes)")
        check(model, recorder)
        XCTAssertEqual(loop.files.watchedPaths, ["/t", "/t/a", "/t/a/b", "/t/a/b/c"])
        // Watched now: what is made next comes as it happens.
        loop.files.create("/t/a/b/c/later")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes.last, DirectoryChange(.created, "/t/a/b/c/later"))
    }

    func testASubtreeRenamedInsideTheTreeKeepsItsWatches() throws {
        loop.files.mkdirs("/t/x/sub/deep")
        let (_, recorder, model) = try watchTree()
        loop.files.rename("/t/x/sub", to: "/t/y")
        loop.runUntilIdle()
        XCTAssertEqual(
            recorder.changes, [DirectoryChange(.renamed, "/t/y", from: "/t/x/sub", directory: true)])
        loop.files.create("/t/y/deep/f")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes.last, DirectoryChange(.created, "/t/y/deep/f"), "named by its new path")
        check(model, recorder)
    }

    func testASubtreeMovedInIsReportedWithWhatItHoldsAndWatched() throws {
        loop.files.mkdirs("/out/in/m")
        loop.files.create("/out/in/m/f")
        let (_, recorder, model) = try watchTree()
        loop.files.rename("/out/in", to: "/t/in")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes.first, DirectoryChange(.movedIn, "/t/in", directory: true))
        check(model, recorder)
        loop.files.create("/t/in/m/g")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes.last, DirectoryChange(.created, "/t/in/m/g"))
        check(model, recorder)
    }

    func testASubtreeMovedOutIsLetGo() throws {
        loop.files.mkdirs("/t/a/b")
        let (_, recorder, model) = try watchTree()
        loop.files.rename("/t/a", to: "/out/a")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes, [DirectoryChange(.movedOut, "/t/a", directory: true)])
        XCTAssertEqual(loop.files.watchedPaths, ["/t"], "its watches are removed")
        loop.files.create("/out/a/b/f")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes.count, 1, "nothing from outside the tree")
        check(model, recorder)
    }

    /// Issue 26's inotify case: a directory made and, before its watch, given a subtree renamed
    /// into it from elsewhere in the tree. The subtree keeps its watch (the kernel's mark is on
    /// its inode), and is found by the new directory's listing.
    func testASubtreeRenamedIntoADirectoryNotWatchedYetIsFoundWithWhatItHolds() throws {
        loop.files.mkdirs("/t/x/sub/deep")
        loop.files.create("/t/x/sub/deep/f")
        let (_, recorder, model) = try watchTree()
        loop.files.mkdirs("/t/in/m")
        loop.files.rename("/t/x/sub", to: "/t/in/m/sub2")
        loop.runUntilIdle()
        check(model, recorder)
        XCTAssertTrue(
            recorder.changes.contains(DirectoryChange(.created, "/t/in/m/sub2/deep/f")), "\(recorder.changes)")
        loop.files.create("/t/in/m/sub2/deep/g")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes.last, DirectoryChange(.created, "/t/in/m/sub2/deep/g"))
        check(model, recorder)
    }

    /// A tree's empty directories share one kept object until something happens in one: a file
    /// made in one is kept there alone, and a rescan after lost events finds exactly what changed
    /// in each, and shares again the one it finds empty.
    func testEmptyDirectoriesShareAKeptObjectAndEachKeepsOnlyItsOwnChanges() throws {
        for name in ["a", "b", "c"] { loop.files.mkdirs("/t/\(name)") }
        let (subscription, recorder, model) = try watchTree()
        loop.runUntilIdle()
        let tree = try XCTUnwrap(subscription.loop.tree)
        func wd(_ name: String) throws -> Int32 { try XCTUnwrap(tree.root.child(Array(name.utf8)[...])).wd }
        func shared(_ name: String) throws -> Bool { loop.router.known.isShared(try wd(name)) }
        XCTAssertEqual(try ["a", "b", "c"].map(shared), [true, true, true])
        XCTAssertFalse(loop.router.known.isShared(tree.root.wd), "the root holds three entries")

        loop.files.create("/t/a/f")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes.last, DirectoryChange(.created, "/t/a/f"))
        XCTAssertEqual(try ["a", "b", "c"].map(shared), [false, true, true])

        loop.files.losingEvents {
            loop.files.create("/t/b/g")
            loop.files.remove("/t/a/f")
        }
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes.filter { $0.kind == .overflow }.count, 1)
        check(model, recorder, queueLost: true)
        XCTAssertEqual(try ["a", "b", "c"].map(shared), [true, false, true], "a is empty again")

        loop.files.create("/t/c/h")
        loop.files.create("/t/a/i")
        loop.runUntilIdle()
        XCTAssertEqual(
            Array(recorder.changes.suffix(2)),
            [DirectoryChange(.created, "/t/c/h"), DirectoryChange(.created, "/t/a/i")])
        check(model, recorder, queueLost: true)
        XCTAssertEqual(names(in: try wd("a")), ["i"])
        XCTAssertEqual(names(in: try wd("b")), ["g"])
        XCTAssertEqual(names(in: try wd("c")), ["h"])
    }

    private func names(in wd: Int32) -> Set<String> {
        var names: Set<String> = []
        loop.router.known.entries(wd)?.forEach { name, _ in names.insert(String(decoding: name, as: UTF8.self)) }
        return names
    }

    /// Issue 26's false end: a subdirectory removed while the queue overflowed, before the rescan
    /// could list it. The rescan finds it gone and says so; the watch goes on.
    func testADirectoryRemovedDuringAnOverflowDoesNotEndTheWatch() throws {
        loop.files.mkdirs("/t/a/b")
        loop.files.mkdirs("/t/keep")
        let (subscription, recorder, model) = try watchTree()
        loop.files.queueCapacity = 8
        for index in 0..<50 { loop.files.create("/t/keep/f\(index)") }
        loop.files.remove("/t/a")
        loop.runUntilIdle()
        XCTAssertFalse(subscription.loop.isEnded, "\(recorder.changes)")
        XCTAssertEqual(recorder.rootsGone, 0)
        XCTAssertEqual(recorder.changes.filter { $0.kind == .overflow }.count, 1)
        check(model, recorder, queueLost: true)
        XCTAssertEqual(loop.files.watchedPaths, ["/t", "/t/keep"])
        loop.files.create("/t/keep/later")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes.last, DirectoryChange(.created, "/t/keep/later"))
    }

    /// A directory of the tree made unreadable while the queue overflowed: the rescan says which
    /// directory it could not list and why, in a `failed` change (not a second overflow), and the
    /// watch goes on with the rest.
    func testADirectoryTheRescanCannotListIsAFailureThatNamesIt() throws {
        loop.files.mkdirs("/t/a/sub")
        loop.files.mkdirs("/t/keep")
        let (subscription, recorder, _) = try watchTree()
        loop.files.queueCapacity = 4
        for index in 0..<10 { loop.files.create("/t/keep/f\(index)") }
        loop.files.chmod("/t/a/sub", 0)
        loop.runUntilIdle()
        XCTAssertFalse(subscription.loop.isEnded)
        XCTAssertEqual(recorder.changes.filter { $0.kind == .overflow }.map(\.path), ["/t"])
        let failures = recorder.changes.filter { $0.kind == .failed }
        XCTAssertEqual(failures.map(\.path), ["/t/a/sub"], "\(recorder.changes)")
        XCTAssertEqual(failures.first?.error?.code, .permissionDenied)
        XCTAssertEqual(failures.first?.error?.path, "/t/a/sub")
        XCTAssertTrue(recorder.changes.allSatisfy { $0.kind == .failed || $0.error == nil }, "errors are failures only")
        loop.files.create("/t/keep/later")
        loop.runUntilIdle()
        XCTAssertEqual(recorder.changes.last, DirectoryChange(.created, "/t/keep/later"))
    }

    func testRemovingTheRootEndsTheWatch() throws {
        loop.files.mkdirs("/t/a")
        let (subscription, recorder, _) = try watchTree()
        loop.files.remove("/t")
        loop.runUntilIdle()
        XCTAssertTrue(subscription.loop.isEnded)
        XCTAssertEqual(recorder.rootsGone, 1)
        XCTAssertEqual(recorder.changes.last, DirectoryChange(.rootRemoved, "/t", directory: true))
        XCTAssertEqual(loop.files.watchedPaths, [])
    }
}
