import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Issue 26's cases, each alone: moves through directories just made or just moved in, and
/// exchanges, checked as a consumer would: the changes applied in order to a model of the tree
/// it started with give the tree on disk (``TreeModel``). Through inotify here, fanotify in
/// ``FanotifyTreeChurnTests``. The races they hit are the kernel's, between the moves and the
/// walk of a new directory: each case runs 20 times.
class TreeChurnTests: WatchedDirectoryTestCase {
    var backend: DirectoryWatcher.Backend { .inotify }
    private var model: TreeModel!

    private func watchTree(loop: EventLoop? = nil) throws {
        let options = DirectoryWatcher.Options(recursive: true, backend: backend)
        try watch {
            try DirectoryWatcher.make(path: directory.path, options: options, delegate: $0, queue: nil, loop: loop)
        }
        _ = watcher.watchedDirectories()
        model = TreeModel.ofDisk(directory.path)
    }

    /// The changes delivered since the last check, applied to the model, give the disk; returns
    /// them.
    @discardableResult
    private func assertTheStreamAddsUp(
        _ what: String, queueLost: Bool = false, file: StaticString = #filePath, line: UInt = #line
    ) -> [DirectoryChange] {
        let changes = delivered()
        let problems = model.apply(changes, queueLost: queueLost)
        if let report = model.differences(problems) {
            XCTFail(
                "\(what): \(report)\nchanges:\n\(changes.map(\.description).joined(separator: "\n"))", file: file,
                line: line)
        }
        return changes
    }

    /// A directory at the absolute `path` with a file, and a directory with a file below.
    private func makeSubtree(_ path: String) {
        for made in [path, path + "/inner"] { XCTAssertEqual(Glibc.mkdir(made, 0o755), 0, made) }
        for file in [path + "/f", path + "/inner/g"] {
            let fd = creat(file, 0o644)
            XCTAssertGreaterThanOrEqual(fd, 0, "\(file): \(String(cString: strerror(errno)))")
            close(fd)
        }
    }

    private func rename(_ from: String, _ to: String) {
        XCTAssertEqual(Glibc.rename(from, to), 0, "rename \(from) \(to): \(String(cString: strerror(errno)))")
    }

    /// Issue 26, inotify: `os.makedirs("T/in/m")` and at once `os.rename("T/x/sub",
    /// "T/in/m/sub2")`: `sub2` was reported as an empty `created` and what it holds never.
    func testASubtreeMovedIntoDirectoriesJustMadeIsReportedWhole() throws {
        for round in 0..<20 { makeSubtree(directory.url("x\(round)")) }
        try watchTree()
        for round in 0..<20 {
            try FileManager.default.createDirectory(
                atPath: directory.url("in\(round)/m"), withIntermediateDirectories: true)
            rename(directory.url("x\(round)"), directory.url("in\(round)/m/sub2"))
            assertTheStreamAddsUp("round \(round)")
            // And below it, later changes carry paths the consumer knows.
            directory.touch("in\(round)/m/sub2/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// Issue 26, fanotify: `mv OUT/in T/in; mv T/in/m T/x/sub/m2`: `in/m` was never reported, it
    /// came as a rename from nothing, and what it held never.
    func testADirectoryMovedOnAsSoonAsItsTreeMovedInIsReportedWhole() throws {
        let outside = TemporaryDirectory()
        for round in 0..<20 {
            XCTAssertEqual(Glibc.mkdir(outside.url("in\(round)"), 0o755), 0)
            makeSubtree(outside.url("in\(round)/m"))
            XCTAssertEqual(Glibc.mkdir(directory.url("x\(round)"), 0o755), 0)
        }
        try watchTree()
        for round in 0..<20 {
            rename(outside.url("in\(round)"), directory.url("in\(round)"))
            rename(directory.url("in\(round)/m"), directory.url("x\(round)/m2"))
            assertTheStreamAddsUp("round \(round)")
            directory.touch("x\(round)/m2/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// A directory of the tree renamed into a directory that has just come in, after the walk
    /// watched that directory and before it listed it, with a file made in it and one removed
    /// just before: the listing meets it at its new path and reports it there with what it
    /// holds, and the events of the two changes follow at that path. The rename's own events,
    /// read after them, were reported as a rename as well, and applied, the consumer's copy from
    /// before the changes replaced what they had said (the file made missing, the one removed
    /// back). Its arrival is said already: only its departure is news.
    func testADirectoryRenamedIntoANewDirectoryBetweenItsWatchAndItsListingIsReportedOnce() throws {
        let outside = TemporaryDirectory()
        let hook = BeforeListing()
        let loop = try EventLoop(system: System(.live.listing(hook)))
        defer {
            watcher?.invalidate()
            watcher = nil
            loop.shutdown()
        }
        for round in 0..<20 {
            makeSubtree(directory.url("x\(round)"))
            for made in [outside.url("in\(round)"), outside.url("in\(round)/n")] {
                XCTAssertEqual(Glibc.mkdir(made, 0o755), 0, made)
            }
        }
        try watchTree(loop: loop)
        for round in 0..<20 {
            let directory = self.directory!
            hook.arm(directory.url("in\(round)/n")) {
                directory.touch("x\(round)/made")
                unlink(directory.url("x\(round)/f"))
                Glibc.rename(directory.url("x\(round)"), directory.url("in\(round)/n/sub"))
            }
            rename(outside.url("in\(round)"), directory.url("in\(round)"))
            // The walk, and what the hook does in it, runs as the move in is routed: its events
            // are read after this barrier's, and before the next one's.
            waitForDelivery(watcher)
            XCTAssertFalse(hook.isArmed, "round \(round): the directory was listed")
            assertTheStreamAddsUp("round \(round)")
            directory.touch("in\(round)/n/sub/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// A directory moved in from outside into a directory that has just come in, after the walk
    /// watched that directory and before it listed it: the listing reports it with what it
    /// holds, and the move's event, read after, is a repeat. On inotify it was reported as a
    /// move in as well, which to a consumer is an empty directory in place of the one the
    /// listing reported: what it holds was lost.
    func testADirectoryMovedInToANewDirectoryBetweenItsWatchAndItsListingIsReportedOnce() throws {
        let outside = TemporaryDirectory()
        let hook = BeforeListing()
        let loop = try EventLoop(system: System(.live.listing(hook)))
        defer {
            watcher?.invalidate()
            watcher = nil
            loop.shutdown()
        }
        for round in 0..<20 {
            makeSubtree(outside.url("y\(round)"))
            for made in [outside.url("in\(round)"), outside.url("in\(round)/n")] {
                XCTAssertEqual(Glibc.mkdir(made, 0o755), 0, made)
            }
        }
        try watchTree(loop: loop)
        for round in 0..<20 {
            let directory = self.directory!
            hook.arm(directory.url("in\(round)/n")) {
                Glibc.rename(outside.url("y\(round)"), directory.url("in\(round)/n/sub"))
            }
            rename(outside.url("in\(round)"), directory.url("in\(round)"))
            waitForDelivery(watcher)
            XCTAssertFalse(hook.isArmed, "round \(round): the directory was listed")
            assertTheStreamAddsUp("round \(round)")
            directory.touch("in\(round)/n/sub/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// While the loop is held: a subtree moved in, another directory moved in, and the first
    /// renamed into the second. The first one's walk finds it gone; the second's lists it and
    /// reports it with what it holds; the rename, read last, adds only the first one's departure
    /// (fanotify, which sees both ends of the rename, walked it again and reported what it holds
    /// a second time, once the rename was no longer reported).
    func testASubtreeRenamedIntoADirectoryMovedInWhileTheLoopIsHeldIsReportedOnce() throws {
        let outside = TemporaryDirectory()
        for round in 0..<20 {
            XCTAssertEqual(Glibc.mkdir(directory.url("x\(round)"), 0o755), 0)
            makeSubtree(outside.url("a\(round)"))
            XCTAssertEqual(Glibc.mkdir(outside.url("m\(round)"), 0o755), 0)
        }
        try watchTree()
        for round in 0..<20 {
            let staller = try Staller(test: self)
            rename(outside.url("a\(round)"), directory.url("x\(round)/a"))
            rename(outside.url("m\(round)"), directory.url("m\(round)"))
            rename(directory.url("x\(round)/a"), directory.url("m\(round)/r"))
            staller.resume()
            assertTheStreamAddsUp("round \(round)")
            directory.touch("m\(round)/r/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// A subtree moved in, and before its walk lists it, its directory moved on and it removed:
    /// the listing finds it gone and reports nothing of what it held, so the move of its
    /// directory, read after, comes from nowhere. It was reported as a rename from a path the
    /// consumer never heard of.
    func testADirectoryMovedOnFromASubtreeRemovedBeforeItsListingComesFromNowhere() throws {
        let outside = TemporaryDirectory()
        let hook = BeforeListing()
        let loop = try EventLoop(system: System(.live.listing(hook)))
        defer {
            watcher?.invalidate()
            watcher = nil
            loop.shutdown()
        }
        for round in 0..<20 { makeSubtree(outside.url("in\(round)")) }
        try watchTree(loop: loop)
        for round in 0..<20 {
            let directory = self.directory!
            hook.arm(directory.url("in\(round)")) {
                Glibc.rename(directory.url("in\(round)/inner"), directory.url("m\(round)"))
                unlink(directory.url("in\(round)/f"))
                rmdir(directory.url("in\(round)"))
            }
            rename(outside.url("in\(round)"), directory.url("in\(round)"))
            waitForDelivery(watcher)
            XCTAssertFalse(hook.isArmed, "round \(round): the directory was listed")
            assertTheStreamAddsUp("round \(round)")
            directory.touch("m\(round)/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// A subtree moved in, and before its walk lists it, a directory made with a file in it
    /// elsewhere in the tree, renamed into the subtree, and the subtree renamed: the listing shows
    /// the directory, which cannot be opened at the old path, and the rename into the subtree,
    /// read after, reports it with what it holds. On fanotify the walk tried it again as a
    /// directory met before the event that brought it, and once the subtree's rename was read,
    /// reported its file a second time.
    func testADirectoryRenamedOntoANameTheWalkCouldNotOpenIsReportedOnce() throws {
        let outside = TemporaryDirectory()
        let hook = BeforeListing()
        let loop = try EventLoop(system: System(.live.listing(hook)))
        defer {
            watcher?.invalidate()
            watcher = nil
            loop.shutdown()
        }
        for round in 0..<20 {
            XCTAssertEqual(Glibc.mkdir(directory.url("x\(round)"), 0o755), 0)
            XCTAssertEqual(Glibc.mkdir(outside.url("in\(round)"), 0o755), 0)
        }
        try watchTree(loop: loop)
        for round in 0..<20 {
            let directory = self.directory!
            hook.arm(directory.url("in\(round)")) {
                Glibc.mkdir(directory.url("x\(round)/q"), 0o755)
                directory.touch("x\(round)/q/f")
                Glibc.rename(directory.url("x\(round)/q"), directory.url("in\(round)/r"))
                Glibc.rename(directory.url("in\(round)"), directory.url("z\(round)"))
            }
            rename(outside.url("in\(round)"), directory.url("in\(round)"))
            waitForDelivery(watcher)
            XCTAssertFalse(hook.isArmed, "round \(round): the directory was listed")
            assertTheStreamAddsUp("round \(round)")
            directory.touch("z\(round)/r/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// Issue 26: a live `RENAME_EXCHANGE` of `fa` and `fb` came as `renamed fa -> fb` then
    /// `renamed fb -> fa`, which applied in order loses a name; in trees, later changes below two
    /// exchanged directories carried the other's path.
    func testAnExchangeIsOneChangeAndTheTreeFollowsIt() throws {
        directory.touch("fa")
        directory.touch("fb")
        makeSubtree(directory.url("da"))
        makeSubtree(directory.url("db"))
        directory.touch("db/only-in-b")
        XCTAssertEqual(Glibc.mkdir(directory.url("other"), 0o755), 0)
        try watchTree()
        XCTAssertEqual(RenameExchange.exchange(directory.url("fa"), directory.url("fb")), 0)
        XCTAssertEqual(
            assertTheStreamAddsUp("files exchanged").filter { $0.kind != .attributesChanged },
            [DirectoryChange(.exchanged, directory.url("fb"), from: directory.url("fa"))])
        XCTAssertEqual(RenameExchange.exchange(directory.url("da"), directory.url("other/db")), -1, "no such entry yet")
        XCTAssertEqual(RenameExchange.exchange(directory.url("da"), directory.url("db")), 0)
        XCTAssertEqual(
            assertTheStreamAddsUp("directories exchanged").filter { $0.kind != .attributesChanged },
            [DirectoryChange(.exchanged, directory.url("db"), from: directory.url("da"), directory: true)])
        // The directory now at `da` is the one that held only-in-b: changes in it carry `da`.
        directory.touch("da/new")
        directory.touch("db/inner/new")
        XCTAssertEqual(
            Set(assertTheStreamAddsUp("below them").filter { $0.kind == .created }.map(\.path)),
            Set([path("da/new"), path("db/inner/new")]))
        // Across directories, a file with a directory.
        XCTAssertEqual(RenameExchange.exchange(directory.url("fa"), directory.url("other")), 0)
        assertTheStreamAddsUp("a file and a directory exchanged")
        directory.touch("fa/later")
        assertTheStreamAddsUp("below the directory exchanged in")
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory.url("da/only-in-b")))
    }

    /// An exchange and at once a rename of either name, or a removal, before the watcher reads
    /// the exchange: the exchange was told from `mv a b; mv b a` by both names being there
    /// still, so it came as two renames, and applied in order they lost a name.
    func testAnExchangeFollowedAtOnceByAChangeOfEitherNameAddsUp() throws {
        for round in 0..<20 {
            directory.touch("fa\(round)")
            directory.touch("fb\(round)")
            makeSubtree(directory.url("da\(round)"))
            XCTAssertEqual(Glibc.mkdir(directory.url("other\(round)"), 0o755), 0)
            makeSubtree(directory.url("other\(round)/db"))
        }
        try watchTree()
        for round in 0..<20 {
            XCTAssertEqual(RenameExchange.exchange(directory.url("fa\(round)"), directory.url("fb\(round)")), 0)
            rename(directory.url(round % 2 == 0 ? "fa\(round)" : "fb\(round)"), directory.url("fc\(round)"))
            assertTheStreamAddsUp("round \(round), files")
            XCTAssertEqual(
                RenameExchange.exchange(directory.url("da\(round)"), directory.url("other\(round)/db")), 0)
            switch round % 3 {
            case 0: rename(directory.url("da\(round)"), directory.url("other\(round)/dc"))
            case 1: rename(directory.url("other\(round)/db"), directory.url("dc\(round)"))
            default: XCTAssertEqual(unlink(directory.url("other\(round)/db/f")), 0)
            }
            assertTheStreamAddsUp("round \(round), directories")
            // Below them, later changes carry the paths the consumer knows.
            for name in ["da\(round)", "other\(round)/db", "other\(round)/dc", "dc\(round)"]
            where FileManager.default.fileExists(atPath: directory.url(name)) {
                directory.touch("\(name)/inner/later")
            }
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// `mv a b; mv b a` gives the kernel's events of an exchange: it is two renames, since `b` is
    /// gone afterwards.
    func testARenameOverANameAndBackIsNotAnExchange() throws {
        directory.touch("a")
        directory.touch("b")
        try watchTree()
        rename(directory.url("a"), directory.url("b"))
        rename(directory.url("b"), directory.url("a"))
        XCTAssertEqual(
            assertTheStreamAddsUp("renamed and back").filter { $0.kind != .attributesChanged },
            [
                DirectoryChange(.renamed, directory.url("b"), from: directory.url("a")),
                DirectoryChange(.renamed, directory.url("a"), from: directory.url("b")),
            ])
    }

    private func exchange(_ first: String, _ second: String) {
        XCTAssertEqual(
            RenameExchange.exchange(directory.url(first), directory.url(second)), 0,
            "exchange \(first) \(second): \(String(cString: strerror(errno)))")
    }

    /// An exchange (of a file and a directory, of two files, of two directories) between two
    /// directories that are both renamed at once after it, while the loop is held: when the
    /// watcher reads the exchange, the paths it knows for the two directories lead nowhere, so
    /// the disk cannot tell it from a rename and its way back. It came as two renames, one of
    /// them a file's onto a directory's name.
    func testAnExchangeBetweenDirectoriesRenamedAtOnceAfterItIsOneChange() throws {
        let pairs = [("f", "sub"), ("f", "g"), ("d", "sub")]
        for round in 0..<12 {
            for parent in ["a\(round)", "b\(round)"] { XCTAssertEqual(Glibc.mkdir(directory.url(parent), 0o755), 0) }
            directory.touch("a\(round)/f")
            directory.touch("b\(round)/g")
            makeSubtree(directory.url("a\(round)/d"))
            makeSubtree(directory.url("b\(round)/sub"))
        }
        try watchTree()
        for round in 0..<12 {
            let (first, second) = pairs[round % pairs.count]
            let staller = try Staller(test: self)
            exchange("a\(round)/\(first)", "b\(round)/\(second)")
            rename(directory.url("a\(round)"), directory.url("a\(round)x"))
            rename(directory.url("b\(round)"), directory.url("b\(round)x"))
            staller.resume()
            let changes = assertTheStreamAddsUp("round \(round): \(first) and \(second)")
            XCTAssertTrue(changes.contains { $0.kind == .exchanged }, "round \(round): one exchange: \(changes)")
        }
    }

    /// A directory made in the tree and at once exchanged with another directory of it, while the
    /// loop is held: the new directory's walk meets the other one under its name, as the tree's
    /// directory moved there, and reports it there with what it holds. The exchange, read after,
    /// then swapped the two again: that directory's contents came twice, the new one's never.
    /// (Its parent made too, only the parent's events are read.)
    func testAnExchangeWithADirectoryJustMadeAddsUp() throws {
        for round in 0..<20 {
            XCTAssertEqual(Glibc.mkdir(directory.url("r\(round)"), 0o755), 0)
            makeSubtree(directory.url("x\(round)"))
        }
        try watchTree()
        for round in 0..<20 {
            let made = round % 2 == 0 ? "r\(round)/p" : "n\(round)/p"
            let staller = try Staller(test: self)
            try FileManager.default.createDirectory(
                atPath: directory.url("\(made)/q"), withIntermediateDirectories: true)
            directory.touch("\(made)/q/f")
            exchange(made, "x\(round)")
            staller.resume()
            assertTheStreamAddsUp("round \(round): \(made)")
            directory.touch("\(made)/inner/later")
            directory.touch("x\(round)/q/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// While the loop is held: directories made, a directory of the tree renamed into them, and
    /// it exchanged at once with another directory of the tree. Its parent's watch came after
    /// both, so the tree sees the exchange as an arrival, then a departure, of the other
    /// directory's name, with the arriving directory's own `IN_MOVE_SELF` between them: that
    /// event let the arrival go alone, and the departure, read after, took away what it had
    /// brought (the arriving directory and everything in it missing, 20 of 20 rounds; the
    /// inotify soak with exchanges anywhere in a step, seed 2128936963).
    func testAnExchangeOfADirectoryJustMovedIntoANewDirectoryAddsUp() throws {
        for round in 0..<20 {
            XCTAssertEqual(Glibc.mkdir(directory.url("r\(round)"), 0o755), 0)
            makeSubtree(directory.url("r\(round)/x"))
            makeSubtree(directory.url("r\(round)/y"))
            directory.touch("r\(round)/y/only-y")
        }
        try watchTree()
        for round in 0..<20 {
            let staller = try Staller(test: self)
            try FileManager.default.createDirectory(
                atPath: directory.url("n\(round)/m"), withIntermediateDirectories: true)
            rename(directory.url("r\(round)/x"), directory.url("n\(round)/m/sub"))
            exchange("n\(round)/m/sub", "r\(round)/y")
            staller.resume()
            assertTheStreamAddsUp("round \(round)")
            directory.touch("r\(round)/y/inner/later")
            directory.touch("n\(round)/m/sub/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// While the loop is held, directories made and a directory of the tree renamed into them
    /// (the new directories' walk meets it there before its rename's event); then, read, it is
    /// exchanged with a file of the tree. It was still marked as met early, and the exchange was
    /// taken for the move that mark stood for: the file's departure, then the directory again
    /// under the file's name, and the directory kept at its own name too (the inotify soak with
    /// exchanges anywhere in a step, seed 2128943969).
    func testAnExchangeOfADirectoryAWalkMetEarlyBeforeAddsUp() throws {
        for round in 0..<20 {
            makeSubtree(directory.url("x\(round)"))
            directory.touch("x\(round)/only-x")
            directory.touch("r\(round)")
        }
        try watchTree()
        for round in 0..<20 {
            let staller = try Staller(test: self)
            try FileManager.default.createDirectory(
                atPath: directory.url("n\(round)/m"), withIntermediateDirectories: true)
            rename(directory.url("x\(round)"), directory.url("n\(round)/m/sub"))
            staller.resume()
            assertTheStreamAddsUp("round \(round), renamed")
            exchange("r\(round)", "n\(round)/m/sub")
            assertTheStreamAddsUp("round \(round), exchanged")
            directory.touch("r\(round)/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// A subtree moved into a directory, and that directory at once exchanged with a file, while
    /// the loop is held: the subtree's walk, at the path its event names, meets a file on the
    /// way (`ENOTDIR`, not `ENOENT`), and what it held was never reported.
    func testASubtreeMovedIntoADirectoryThenExchangedWithAFileIsReportedWhole() throws {
        let outside = TemporaryDirectory()
        for round in 0..<20 {
            XCTAssertEqual(Glibc.mkdir(directory.url("d\(round)"), 0o755), 0)
            directory.touch("file\(round)")
            makeSubtree(outside.url("in\(round)"))
        }
        try watchTree()
        for round in 0..<20 {
            let staller = try Staller(test: self)
            rename(outside.url("in\(round)"), directory.url("d\(round)/in"))
            exchange("d\(round)", "file\(round)")
            staller.resume()
            assertTheStreamAddsUp("round \(round)")
            directory.touch("file\(round)/in/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// A subtree moved in, and at once exchanged with a file of the tree, while the loop is held:
    /// its walk, at the name it came in by, meets the file (`ENOTDIR`), and is tried again after
    /// the exchange's event, at the name the exchange gave it. (Before, a fanotify tree never
    /// tried it again, and what it held was never reported: the fanotify soak with exchanges
    /// anywhere, seed 2128937308.)
    func testASubtreeMovedInThenExchangedWithAFileAtOnceIsReportedWhole() throws {
        let outside = TemporaryDirectory()
        for round in 0..<20 {
            directory.touch("file\(round)")
            makeSubtree(outside.url("in\(round)"))
        }
        try watchTree()
        for round in 0..<20 {
            let staller = try Staller(test: self)
            rename(outside.url("in\(round)"), directory.url("in\(round)"))
            exchange("in\(round)", "file\(round)")
            staller.resume()
            assertTheStreamAddsUp("round \(round)")
            directory.touch("file\(round)/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// While the loop is held, a subtree moved in, directories made with a file, and the
    /// subtree at once exchanged with the new directory: the subtree's walk, at the name it came
    /// in by, meets the new directory there, before the events that make it. (Before, on
    /// fanotify: its creation, read after, found it in the tree and said nothing of it, and the
    /// exchange, read last, swapped the two again: the subtree's contents under the wrong name,
    /// and the new directory's never reported; the fanotify soak with exchanges anywhere, seed
    /// 2128937229.)
    func testAnExchangeOfASubtreeJustMovedInWithADirectoryJustMadeAddsUp() throws {
        let outside = TemporaryDirectory()
        for round in 0..<20 {
            makeSubtree(outside.url("in\(round)"))
            outside.touch("in\(round)/only-in")
        }
        try watchTree()
        for round in 0..<20 {
            let staller = try Staller(test: self)
            rename(outside.url("in\(round)"), directory.url("m\(round)"))
            try FileManager.default.createDirectory(
                atPath: directory.url("n\(round)/m"), withIntermediateDirectories: true)
            directory.touch("n\(round)/m/only-m")
            exchange("m\(round)", "n\(round)/m")
            staller.resume()
            assertTheStreamAddsUp("round \(round)")
            directory.touch("m\(round)/later")
            directory.touch("n\(round)/m/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// While the loop is held, a subtree moved in, one of its directories at once exchanged with
    /// a file in another directory of the tree, and that directory renamed: the kernel reports
    /// the exchange's two halves in that directory alone (the subtree was not watched yet), the
    /// directory's arrival under the file's name first. (Before, on inotify: the two came as
    /// `movedIn` of the directory then `movedOut` of the file, which, applied in order, lose the
    /// directory; the inotify soak with exchanges anywhere and churn after, seed 2128937056.)
    func testAnExchangeWithADirectoryOfASubtreeJustMovedInThenARenameAddsUp() throws {
        let outside = TemporaryDirectory()
        for round in 0..<20 {
            makeSubtree(outside.url("in\(round)"))
            XCTAssertEqual(Glibc.mkdir(directory.url("a\(round)"), 0o755), 0)
            directory.touch("a\(round)/file")
            XCTAssertEqual(Glibc.mkdir(directory.url("b\(round)"), 0o755), 0)
        }
        try watchTree()
        for round in 0..<20 {
            let staller = try Staller(test: self)
            rename(outside.url("in\(round)"), directory.url("b\(round)/in"))
            exchange("b\(round)/in/inner", "a\(round)/file")
            rename(directory.url("a\(round)"), directory.url("b\(round)/a"))
            staller.resume()
            assertTheStreamAddsUp("round \(round)")
            directory.touch("b\(round)/a/file/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// While the loop is held, a directory moved in, at once exchanged with a directory of the
    /// tree, and moved out again: when the watcher reads the exchange, the name it came in by is
    /// gone and known by no inode, and the directory that came in had no watch yet to tell. The
    /// other directory does: under its name now is another one. (Before, on inotify: two
    /// renames, which, applied in order, left the tree's directory where it was with what it
    /// held, and what came in under its name never reported; the inotify soak with exchanges
    /// anywhere and churn after, seed 2128937004.)
    func testAnExchangeWithADirectoryJustMovedInThenMovedOutAddsUp() throws {
        let outside = TemporaryDirectory()
        for round in 0..<20 {
            makeSubtree(directory.url("a\(round)"))
            directory.touch("a\(round)/only-a")
            makeSubtree(outside.url("b\(round)"))
            outside.touch("b\(round)/only-b")
        }
        try watchTree()
        for round in 0..<20 {
            let staller = try Staller(test: self)
            rename(outside.url("b\(round)"), directory.url("b\(round)"))
            exchange("a\(round)", "b\(round)")
            rename(directory.url("b\(round)"), outside.url("gone\(round)"))
            staller.resume()
            assertTheStreamAddsUp("round \(round)")
            directory.touch("a\(round)/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// While the loop is held, a directory moved in and a directory of the tree moved into it:
    /// the walk of the one moved in meets the other there and marks it as met early, and the
    /// kernel never reports that move's arrival (the directory it went to was not watched yet).
    /// Then, read, a file made under the old name and exchanged with the directory. (Before, the
    /// mark stayed, and the exchange was taken for the move it stood for: its other end never
    /// reported, 20 of 20 rounds on inotify; the inotify soak with exchanges anywhere, seed
    /// 2128937266.)
    func testADirectoryMetEarlyForAMoveWhoseArrivalNeverCameIsNotTakenForItLater() throws {
        let outside = TemporaryDirectory()
        for round in 0..<20 {
            makeSubtree(directory.url("a\(round)"))
            XCTAssertEqual(Glibc.mkdir(outside.url("r\(round)"), 0o755), 0)
        }
        try watchTree()
        for round in 0..<20 {
            let staller = try Staller(test: self)
            rename(outside.url("r\(round)"), directory.url("r\(round)"))
            rename(directory.url("a\(round)"), directory.url("r\(round)/a"))
            staller.resume()
            assertTheStreamAddsUp("round \(round), moved")
            directory.touch("a\(round)")
            exchange("a\(round)", "r\(round)/a")
            assertTheStreamAddsUp("round \(round), exchanged")
            directory.touch("a\(round)/inner/later")
            assertTheStreamAddsUp("round \(round), later")
        }
    }

    /// Directories exchanged across directories while the events were lost, one of them moved on
    /// at once to where the rescan lists it first: its node moves there, and its old name, which
    /// holds the other directory since, was taken for the same directory by its name (a directory
    /// made while watching is known by name alone until the loop has a moment to learn its
    /// inode). A directory of a fanotify tree made while watching has no inode read: its handle
    /// tells the rescan whether its name still holds it.
    func testDirectoriesExchangedAcrossDirectoriesWhileEventsWereLostAreFoundByTheRescan() throws {
        RescanTests.waitForTheBirthClockToTick()
        let loss = try QueueLoss(.fast, fanotify: backend == .fanotify)
        defer {
            watcher?.invalidate()
            loss.shutdown()
        }
        try watchTree(loop: loss.loop)
        for round in 0..<6 {
            XCTAssertEqual(Glibc.mkdir(directory.url("a\(round)"), 0o755), 0)
            XCTAssertEqual(Glibc.mkdir(directory.url("a\(round)/deep"), 0o755), 0)
            makeSubtree(directory.url("a\(round)/deep/x"))
            directory.touch("a\(round)/deep/x/only-x")
            makeSubtree(directory.url("r\(round)"))
            directory.touch("r\(round)/only-r")
            makeSubtree(directory.url("s\(round)"))
            directory.touch("s\(round)/only-s")
            makeSubtree(directory.url("a\(round)/deep/z"))
            directory.touch("a\(round)/deep/z/only-z")
        }
        // No barrier between: the loop, stalled in a callback right after it read what was made,
        // has not learnt their inodes from a listing when the queue is lost.
        try loss.lose(test: self, fillers: nil) {
            for round in 0..<6 {
                exchange("a\(round)/deep/x", "r\(round)")
                rename(directory.url("r\(round)"), directory.url("c\(round)"))
                exchange("s\(round)", "a\(round)/deep/z")
            }
        }
        assertTheStreamAddsUp("exchanged while lost", queueLost: true)
        for round in 0..<6 {
            directory.touch("c\(round)/inner/later")
            directory.touch("s\(round)/inner/later")
            directory.touch("a\(round)/deep/z/inner/later")
        }
        assertTheStreamAddsUp("later")
    }

    /// Directories removed while the events were lost and others made, which the file system
    /// may give the freed inode numbers (ext4 does, most often): the removed directory's watch
    /// went with it, so a node's inode no longer vouches that a directory with that number is
    /// the same one. The listing's birth bound does. (Before: a new directory with a removed
    /// one's number was taken for it, renamed, with what the removed one held; the inotify soak,
    /// seed 2128939231.)
    func testADirectoryMadeWithTheNumberOfOneRemovedWhileEventsWereLostIsNew() throws {
        XCTAssertEqual(Glibc.mkdir(directory.url("a"), 0o755), 0)
        for round in 0..<20 {
            XCTAssertEqual(Glibc.mkdir(directory.url("a/d\(round)"), 0o755), 0)
        }
        // Born before the first listing's tick, so that listing vouches for their inodes.
        RescanTests.waitForTheBirthClockToTick()
        let loss = try QueueLoss(.fast, fanotify: backend == .fanotify)
        defer {
            watcher?.invalidate()
            loss.shutdown()
        }
        try watchTree(loop: loss.loop)
        var reused = 0
        try loss.lose(test: self, fillers: nil) {
            for round in 0..<20 {
                var old = stat()
                XCTAssertEqual(lstat(directory.url("a/d\(round)"), &old), 0)
                XCTAssertEqual(Glibc.rmdir(directory.url("a/d\(round)")), 0)
                XCTAssertEqual(Glibc.mkdir(directory.url("a/p\(round)"), 0o755), 0)
                directory.touch("a/p\(round)/made")
                var new = stat()
                XCTAssertEqual(lstat(directory.url("a/p\(round)"), &new), 0)
                if new.st_ino == old.st_ino { reused += 1 }
            }
        }
        assertTheStreamAddsUp("removed and made while lost (\(reused) of 20 numbers reused)", queueLost: true)
        for round in 0..<20 { directory.touch("a/p\(round)/later") }
        assertTheStreamAddsUp("later")
    }

    /// With the queue lost, two directories exchanged and the one now under the first name
    /// moved into the other: the rescan finds the second directory renamed onto the first one's
    /// name, and the first one's node, still under that name, was left in place, listed at a path
    /// that holds the other directory since: what it held reported twice (the inotify soak with
    /// exchanges while the queue is lost, seed 2128937978).
    func testAnExchangeThenAMoveIntoTheOtherWhileEventsWereLostIsFoundByTheRescan() throws {
        for round in 0..<6 {
            for name in ["a\(round)", "b\(round)"] {
                makeSubtree(directory.url(name))
                directory.touch("\(name)/only-\(name)")
            }
        }
        RescanTests.waitForTheBirthClockToTick()
        let loss = try QueueLoss(.fast, fanotify: backend == .fanotify)
        defer {
            watcher?.invalidate()
            loss.shutdown()
        }
        try watchTree(loop: loss.loop)
        try loss.lose(test: self, fillers: nil) {
            for round in 0..<6 {
                exchange("a\(round)", "b\(round)")
                rename(directory.url("a\(round)"), directory.url("b\(round)/c"))
            }
        }
        assertTheStreamAddsUp("exchanged and moved while lost", queueLost: true)
        for round in 0..<6 {
            directory.touch("b\(round)/inner/later")
            directory.touch("b\(round)/c/inner/later")
        }
        assertTheStreamAddsUp("later")
    }

    /// With the queue lost, a directory exchanged with a directory or a file, and either name
    /// removed: the rescan finds what each name holds now, and the removed one gone (the
    /// inotify soak with exchanges anywhere, seed 2128937059: a directory exchanged with a file
    /// and removed under the file's old name stayed watched under its own).
    func testAnExchangeThenARemovalOfEitherWhileEventsWereLostIsFoundByTheRescan() throws {
        for round in 0..<8 {
            XCTAssertEqual(Glibc.mkdir(directory.url("d\(round)"), 0o755), 0)
            makeSubtree(directory.url("d\(round)/a"))
            directory.touch("d\(round)/a/only-a")
            if round % 4 < 2 {
                makeSubtree(directory.url("d\(round)/b"))
                directory.touch("d\(round)/b/only-b")
            } else {
                directory.touch("d\(round)/b")
            }
        }
        RescanTests.waitForTheBirthClockToTick()
        let loss = try QueueLoss(.fast, fanotify: backend == .fanotify)
        defer {
            watcher?.invalidate()
            loss.shutdown()
        }
        try watchTree(loop: loss.loop)
        try loss.lose(test: self, fillers: nil) {
            for round in 0..<8 {
                exchange("d\(round)/a", "d\(round)/b")
                let removed = directory.url("d\(round)/\(round % 2 == 0 ? "a" : "b")")
                XCTAssertNoThrow(try FileManager.default.removeItem(atPath: removed))
            }
        }
        assertTheStreamAddsUp("exchanged and removed while lost", queueLost: true)
        for round in 0..<8 where round % 4 < 2 || round % 2 == 0 {
            // What is left of the directory first named `a` (now `b`), or the other one (`a`).
            directory.touch("d\(round)/\(round % 2 == 0 ? "b" : "a")/inner/later")
        }
        assertTheStreamAddsUp("later")
        XCTAssertEqual(
            watcher.watchedDirectories().map(\.description).sorted(),
            ([directory.path] + TreeModel.walk(directory.path).filter(\.value).keys.map { directory.url($0) }).sorted())
    }

    private func path(_ name: String) -> FileSystemPath { FileSystemPath(directory.url(name)) }
}

/// ``TreeChurnTests`` through marked.
final class FanotifyTreeChurnTests: TreeChurnTests {
    override var backend: DirectoryWatcher.Backend { .fanotify }

    // Declared again: test discovery on Linux lists a class's own tests alone.
    override func testASubtreeMovedIntoDirectoriesJustMadeIsReportedWhole() throws {
        try super.testASubtreeMovedIntoDirectoriesJustMadeIsReportedWhole()
    }

    override func testADirectoryMovedOnAsSoonAsItsTreeMovedInIsReportedWhole() throws {
        try super.testADirectoryMovedOnAsSoonAsItsTreeMovedInIsReportedWhole()
    }

    override func testADirectoryRenamedIntoANewDirectoryBetweenItsWatchAndItsListingIsReportedOnce() throws {
        try super.testADirectoryRenamedIntoANewDirectoryBetweenItsWatchAndItsListingIsReportedOnce()
    }

    override func testADirectoryMovedInToANewDirectoryBetweenItsWatchAndItsListingIsReportedOnce() throws {
        try super.testADirectoryMovedInToANewDirectoryBetweenItsWatchAndItsListingIsReportedOnce()
    }

    override func testASubtreeRenamedIntoADirectoryMovedInWhileTheLoopIsHeldIsReportedOnce() throws {
        try super.testASubtreeRenamedIntoADirectoryMovedInWhileTheLoopIsHeldIsReportedOnce()
    }

    override func testADirectoryMovedOnFromASubtreeRemovedBeforeItsListingComesFromNowhere() throws {
        try super.testADirectoryMovedOnFromASubtreeRemovedBeforeItsListingComesFromNowhere()
    }

    override func testADirectoryRenamedOntoANameTheWalkCouldNotOpenIsReportedOnce() throws {
        try super.testADirectoryRenamedOntoANameTheWalkCouldNotOpenIsReportedOnce()
    }

    override func testAnExchangeIsOneChangeAndTheTreeFollowsIt() throws {
        try super.testAnExchangeIsOneChangeAndTheTreeFollowsIt()
    }

    override func testAnExchangeFollowedAtOnceByAChangeOfEitherNameAddsUp() throws {
        try super.testAnExchangeFollowedAtOnceByAChangeOfEitherNameAddsUp()
    }

    override func testARenameOverANameAndBackIsNotAnExchange() throws {
        try super.testARenameOverANameAndBackIsNotAnExchange()
    }

    override func testAnExchangeBetweenDirectoriesRenamedAtOnceAfterItIsOneChange() throws {
        try super.testAnExchangeBetweenDirectoriesRenamedAtOnceAfterItIsOneChange()
    }

    override func testAnExchangeWithADirectoryJustMadeAddsUp() throws {
        try super.testAnExchangeWithADirectoryJustMadeAddsUp()
    }

    override func testAnExchangeOfADirectoryJustMovedIntoANewDirectoryAddsUp() throws {
        try super.testAnExchangeOfADirectoryJustMovedIntoANewDirectoryAddsUp()
    }

    override func testADirectoryMadeWithTheNumberOfOneRemovedWhileEventsWereLostIsNew() throws {
        try super.testADirectoryMadeWithTheNumberOfOneRemovedWhileEventsWereLostIsNew()
    }

    override func testAnExchangeOfADirectoryAWalkMetEarlyBeforeAddsUp() throws {
        try super.testAnExchangeOfADirectoryAWalkMetEarlyBeforeAddsUp()
    }

    override func testAnExchangeThenAMoveIntoTheOtherWhileEventsWereLostIsFoundByTheRescan() throws {
        try super.testAnExchangeThenAMoveIntoTheOtherWhileEventsWereLostIsFoundByTheRescan()
    }

    override func testASubtreeMovedIntoADirectoryThenExchangedWithAFileIsReportedWhole() throws {
        try super.testASubtreeMovedIntoADirectoryThenExchangedWithAFileIsReportedWhole()
    }

    override func testDirectoriesExchangedAcrossDirectoriesWhileEventsWereLostAreFoundByTheRescan() throws {
        try super.testDirectoriesExchangedAcrossDirectoriesWhileEventsWereLostAreFoundByTheRescan()
    }

    override func testAnExchangeThenARemovalOfEitherWhileEventsWereLostIsFoundByTheRescan() throws {
        try super.testAnExchangeThenARemovalOfEitherWhileEventsWereLostIsFoundByTheRescan()
    }

    override func testASubtreeMovedInThenExchangedWithAFileAtOnceIsReportedWhole() throws {
        try super.testASubtreeMovedInThenExchangedWithAFileAtOnceIsReportedWhole()
    }

    override func testAnExchangeOfASubtreeJustMovedInWithADirectoryJustMadeAddsUp() throws {
        try super.testAnExchangeOfASubtreeJustMovedInWithADirectoryJustMadeAddsUp()
    }

    override func testAnExchangeWithADirectoryOfASubtreeJustMovedInThenARenameAddsUp() throws {
        try super.testAnExchangeWithADirectoryOfASubtreeJustMovedInThenARenameAddsUp()
    }

    override func testAnExchangeWithADirectoryJustMovedInThenMovedOutAddsUp() throws {
        try super.testAnExchangeWithADirectoryJustMovedInThenMovedOutAddsUp()
    }

    override func testADirectoryMetEarlyForAMoveWhoseArrivalNeverCameIsNotTakenForItLater() throws {
        try super.testADirectoryMetEarlyForAMoveWhoseArrivalNeverCameIsNotTakenForItLater()
    }
}
