import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Settled batches as a state machine: what a batch adds up to (``SettledBatch``), and when it is
/// due (``Settler``), on a clock driven by hand.
final class SettlingTests: XCTestCase {
    private let ms: UInt64 = 1_000_000
    private var quiet: UInt64 { 300 * ms }
    private var maximum: UInt64 { 1_000 * ms }

    private func batch(_ changes: [DirectoryChange], listsRemovedContents: Bool = false) -> [DirectoryChange] {
        var batch = SettledBatch(listsRemovedContents: listsRemovedContents)
        for change in changes { batch.add(change) }
        return batch.take()
    }

    private func settler(reporting events: DirectoryWatcher.Events = .default) -> Settler {
        Settler(quietPeriod: quiet, maximumWait: maximum, reportedMask: events.eventMask)
    }

    // MARK: - Coalescing: each rule of Docs/Settling

    func testCreatedThenModifiedIsOneCreated() {
        XCTAssertEqual(
            batch([.init(.created, "/d/a"), .init(.modified, "/d/a"), .init(.attributesChanged, "/d/a")]),
            [.init(.created, "/d/a")])
    }

    func testCreatedThenRemovedIsNothing() {
        XCTAssertEqual(batch([.init(.created, "/d/a"), .init(.modified, "/d/a"), .init(.removed, "/d/a")]), [])
        XCTAssertEqual(batch([.init(.created, "/d/a"), .init(.movedOut, "/d/a")]), [])
        XCTAssertEqual(batch([.init(.movedIn, "/d/a"), .init(.removed, "/d/a")]), [])
    }

    func testARenameChainIsOneRename() {
        XCTAssertEqual(
            batch([.init(.renamed, "/d/b", from: "/d/a"), .init(.renamed, "/d/c", from: "/d/b")]),
            [.init(.renamed, "/d/c", from: "/d/a")])
        XCTAssertEqual(
            batch([.init(.renamed, "/d/b", from: "/d/a"), .init(.renamed, "/d/a", from: "/d/b")]), [],
            "renamed back: nothing")
        XCTAssertEqual(
            batch([.init(.created, "/d/a"), .init(.renamed, "/d/b", from: "/d/a")]), [.init(.created, "/d/b")],
            "created, then renamed: created under its last name")
    }

    /// An exchange stays one change, however it is folded: as two renames it would lose a name.
    func testExchangesAddUpToExchanges() {
        XCTAssertEqual(
            batch([.init(.exchanged, "/d/b", from: "/d/a"), .init(.modified, "/d/b")]),
            [.init(.exchanged, "/d/b", from: "/d/a"), .init(.modified, "/d/b")])
        XCTAssertEqual(
            batch([.init(.exchanged, "/d/b", from: "/d/a"), .init(.exchanged, "/d/a", from: "/d/b")]), [],
            "exchanged back: nothing")
        // a, b, c exchanged round (a's entry ends at b, b's at c, c's at a): two exchanges that,
        // applied in order, give the same.
        XCTAssertEqual(
            batch([.init(.exchanged, "/d/b", from: "/d/a"), .init(.exchanged, "/d/c", from: "/d/a")]),
            [.init(.exchanged, "/d/b", from: "/d/a"), .init(.exchanged, "/d/c", from: "/d/a")])
        // Directories: what is below each follows it.
        XCTAssertEqual(
            batch([
                .init(.created, "/d/x/new"), .init(.exchanged, "/d/y", from: "/d/x", directory: true),
                .init(.modified, "/d/x/old"),
            ]),
            [
                .init(.exchanged, "/d/y", from: "/d/x", directory: true), .init(.created, "/d/y/new"),
                .init(.modified, "/d/x/old"),
            ])
    }

    func testAChangeFollowedByItsRenameIsReportedUnderTheNewName() {
        XCTAssertEqual(
            batch([.init(.modified, "/d/a"), .init(.renamed, "/d/b", from: "/d/a"), .init(.modified, "/d/b")]),
            [.init(.renamed, "/d/b", from: "/d/a"), .init(.modified, "/d/b")])
    }

    func testADirectoryRemovedWithItsContentsIsOneRemoval() {
        let removal: [DirectoryChange] = [
            .init(.modified, "/d/x/keep"),
            .init(.removed, "/d/x/y/f"), .init(.removed, "/d/x/y", directory: true), .init(.removed, "/d/x/g"),
            .init(.removed, "/d/x/keep"), .init(.removed, "/d/x", directory: true),
        ]
        XCTAssertEqual(batch(removal), [.init(.removed, "/d/x", directory: true)])
        XCTAssertEqual(
            batch(removal, listsRemovedContents: true),
            [
                .init(.removed, "/d/x/keep"), .init(.removed, "/d/x/y/f"), .init(.removed, "/d/x/y", directory: true),
                .init(.removed, "/d/x/g"), .init(.removed, "/d/x", directory: true),
            ], "asked for: each entry, in order")
        // A directory made and removed within the batch: nothing, whatever was in it.
        XCTAssertEqual(
            batch([
                .init(.created, "/d/n", directory: true), .init(.created, "/d/n/f"), .init(.removed, "/d/n/f"),
                .init(.removed, "/d/n", directory: true),
            ]), [])
        // An entry moved into it from elsewhere in the watch went with it: it is reported gone
        // under the path the watcher knew.
        XCTAssertEqual(
            batch([.init(.renamed, "/d/x/f", from: "/d/f"), .init(.removed, "/d/x", directory: true)]),
            [.init(.removed, "/d/f"), .init(.removed, "/d/x", directory: true)])
    }

    func testManyWritesAreOneModified() {
        let writes = (0..<1_000).map { _ in DirectoryChange(.modified, "/d/log") }
        XCTAssertEqual(batch(writes), [.init(.modified, "/d/log")])
    }

    func testARenamedDirectoryComesBeforeWhatChangedInItUnderItsNewPath() {
        XCTAssertEqual(
            batch([
                .init(.modified, "/d/old/f"), .init(.created, "/d/old/g"),
                .init(.renamed, "/d/new", from: "/d/old", directory: true),
            ]),
            [
                .init(.renamed, "/d/new", from: "/d/old", directory: true), .init(.modified, "/d/new/f"),
                .init(.created, "/d/new/g"),
            ])
        XCTAssertEqual(
            batch([
                .init(.created, "/d/made", directory: true), .init(.created, "/d/made/f"),
                .init(.renamed, "/d/named", from: "/d/made", directory: true),
            ]),
            [.init(.created, "/d/named", directory: true), .init(.created, "/d/named/f")])
    }

    func testAnEntryReplacedByARenameIsRemovedThenTheNewOneCreated() {
        // An editor's save: write a temporary file, rename it over the original.
        XCTAssertEqual(
            batch([
                .init(.modified, "/d/doc"), .init(.created, "/d/doc.tmp"), .init(.modified, "/d/doc.tmp"),
                .init(.renamed, "/d/doc", from: "/d/doc.tmp"),
            ]),
            [.init(.removed, "/d/doc"), .init(.created, "/d/doc")])
    }

    func testMovedOutAndInKeepWhereTheyCameFrom() {
        XCTAssertEqual(
            batch([.init(.modified, "/d/a"), .init(.movedOut, "/d/a")]), [.init(.movedOut, "/d/a")])
        XCTAssertEqual(
            batch([.init(.movedIn, "/d/b", from: "/elsewhere/b"), .init(.modified, "/d/b")]),
            [.init(.movedIn, "/d/b", from: "/elsewhere/b")])
    }

    func testAnOverflowNoticeComesFirstAndTheRootsEndLast() {
        var rescanned = DirectoryChange(.created, "/d/found")
        rescanned.foundByRescan = true
        XCTAssertEqual(
            batch([.init(.created, "/d/a"), .init(.overflow, "/d", directory: true), rescanned]),
            [.init(.overflow, "/d", directory: true), .init(.created, "/d/a"), rescanned])
        XCTAssertEqual(
            batch([.init(.modified, "/d/a"), .init(.removed, "/d/a"), .init(.rootRemoved, "/d", directory: true)]),
            [.init(.rootRemoved, "/d", directory: true)], "the root went with everything in it")
        XCTAssertEqual(
            batch([.init(.created, "/d/a"), .init(.rootMoved, "/d", directory: true)]),
            [.init(.created, "/d/a"), .init(.rootMoved, "/d", directory: true)])
    }

    func testRemovedThenCreatedAgainIsBoth() {
        XCTAssertEqual(
            batch([.init(.removed, "/d/a"), .init(.created, "/d/a"), .init(.modified, "/d/a")]),
            [.init(.removed, "/d/a"), .init(.created, "/d/a")])
    }

    // MARK: - When a batch is due

    func testNothingIsDueWhileNothingWaits() {
        var settler = settler()
        XCTAssertNil(settler.deadline, "no timer while idle")
        XCTAssertNil(settler.take(now: 10 * maximum))
        XCTAssertTrue(settler.add(.init(.created, "/d/a"), now: 0))
        XCTAssertNotNil(settler.take(now: quiet))
        XCTAssertNil(settler.deadline, "none after the batch")
    }

    func testABatchIsDueAQuietPeriodAfterTheLastChange() {
        var settler = settler()
        XCTAssertTrue(settler.add(.init(.created, "/d/a"), now: 0))
        XCTAssertFalse(settler.add(.init(.created, "/d/b"), now: 100 * ms))
        XCTAssertEqual(settler.deadline, 400 * ms)
        XCTAssertNil(settler.take(now: 400 * ms - 1))
        XCTAssertEqual(settler.take(now: 400 * ms), [.init(.created, "/d/a"), .init(.created, "/d/b")])
    }

    /// The writer: a 64 KiB append every 150 ms for two seconds, with a quiet period of
    /// 300 ms and a maximum of ten seconds.
    func testAFileBeingWrittenHoldsTheBatchUntilItIsClosed() {
        var settler = Settler(
            quietPeriod: quiet, maximumWait: 10_000 * ms, reportedMask: DirectoryWatcher.Events.default.eventMask)
        _ = settler.add(.init(.created, "/d/f"), now: 0)
        var now: UInt64 = 0
        while now <= 2_000 * ms {
            _ = settler.add(.init(.modified, "/d/f"), now: now)
            XCTAssertNil(settler.take(now: now), "nothing while it writes")
            now += 150 * ms
        }
        // A writer that pauses longer than the quiet period still holds the batch.
        XCTAssertNil(settler.take(now: now + 5 * quiet))
        let closed = now + 5 * quiet
        _ = settler.add(.init(.writerClosed, "/d/f"), now: closed)
        XCTAssertEqual(settler.deadline, closed + quiet)
        XCTAssertNil(settler.take(now: closed + quiet - 1))
        XCTAssertEqual(settler.take(now: closed + quiet), [.init(.created, "/d/f")])
    }

    // MARK: - Version-control operations

    /// git's checkout: the lock made, files written with pauses longer than the quiet period,
    /// the index written into the lock and the lock renamed onto it. One batch, a quiet period
    /// after the rename.
    func testAGitOperationHoldsTheBatchUntilItsLockIsRenamedAway() {
        var settler = Settler(
            quietPeriod: quiet, maximumWait: 10_000 * ms, reportedMask: DirectoryWatcher.Events.default.eventMask)
        _ = settler.add(.init(.created, "/repo/.git/index.lock"), now: 0)
        _ = settler.add(.init(.opened, "/repo/.git/index.lock"), now: 0)
        var now: UInt64 = 0
        for index in 0..<5 {
            now += 2 * quiet
            _ = settler.add(.init(.created, "/repo/file-\(index)"), now: now)
            _ = settler.add(.init(.writerClosed, "/repo/file-\(index)"), now: now)
            XCTAssertNil(settler.take(now: now + quiet), "nothing while the lock exists")
        }
        _ = settler.add(.init(.modified, "/repo/.git/index.lock"), now: now)
        _ = settler.add(.init(.writerClosed, "/repo/.git/index.lock"), now: now)
        XCTAssertNil(settler.take(now: now + 2 * quiet), "the lock closed is not the lock gone")
        now += 3 * quiet
        _ = settler.add(.init(.renamed, "/repo/.git/index", from: "/repo/.git/index.lock"), now: now)
        XCTAssertEqual(settler.deadline, now + quiet)
        let batch = settler.take(now: now + quiet)
        XCTAssertEqual(batch?.filter { !$0.path.bytes.starts(with: Array("/repo/.git".utf8)) }.count, 5)
        XCTAssertTrue(settler.locks.isEmpty)
    }

    /// Mercurial's `.hg/wlock`, removed when done; a name like a lock's elsewhere holds nothing;
    /// a watcher that does not wait for version control is not held.
    func testOtherLocksAndNamesThatAreNotLocks() {
        var settler = settler()
        _ = settler.add(.init(.created, "/repo/a"), now: 0)
        _ = settler.add(.init(.created, "/repo/.hg/wlock"), now: 0)
        XCTAssertEqual(settler.deadline, maximum, "held to the maximum")
        _ = settler.add(.init(.removed, "/repo/.hg/wlock"), now: 10 * ms)
        XCTAssertEqual(settler.deadline, 10 * ms + quiet)

        let locks = [
            "/.git/index.lock", "/repo/.git/HEAD.lock", "/repo/.git/refs/heads/main.lock",
            "/repo/.git/worktrees/w/index.lock", "/repo/.hg/store/lock",
        ]
        let others = [
            "/repo/index.lock", "/repo/x.git/index.lock", "/repo/.git/index.lock.bak", "/repo/.git/.lock",
            "/repo/.gitx/a.lock", "/repo/.hg/lock", "/repo/.git",
        ]
        for path in locks { XCTAssertTrue(Settler.isVersionControlLock(FileSystemPath(path)), path) }
        for path in others { XCTAssertFalse(Settler.isVersionControlLock(FileSystemPath(path)), path) }
        var plain = Settler(
            quietPeriod: quiet, maximumWait: maximum, reportedMask: DirectoryWatcher.Events.default.eventMask,
            waitsForVersionControl: false)
        _ = plain.add(.init(.created, "/repo/.git/index.lock"), now: 0)
        XCTAssertEqual(plain.deadline, quiet)
    }

    /// A lock left by a crash holds no batch past the maximum wait, nor the next; an overflow,
    /// which may have lost its removal, lets go of it.
    func testALeftoverLockHoldsNothingPastTheMaximumWait() {
        var settler = settler()
        _ = settler.add(.init(.created, "/repo/.git/index.lock"), now: 0)
        XCTAssertNil(settler.take(now: maximum - 1))
        XCTAssertNotNil(settler.take(now: maximum))
        _ = settler.add(.init(.created, "/repo/a"), now: maximum + 1)
        XCTAssertEqual(settler.deadline, maximum + 1 + quiet)

        var overflowed = self.settler()
        _ = overflowed.add(.init(.created, "/repo/.git/index.lock"), now: 0)
        _ = overflowed.add(.init(.overflow, "/repo", directory: true), now: 1)
        XCTAssertEqual(overflowed.deadline, 1 + quiet)
    }

    func testAWriterThatNeverStopsStillGetsABatchAtTheMaximum() {
        var settler = settler()
        var now: UInt64 = 0
        var batches: [[DirectoryChange]] = []
        while now < 2_500 * ms {
            _ = settler.add(.init(.modified, "/d/log"), now: now)
            if let batch = settler.take(now: now) { batches.append(batch) }
            now += 50 * ms
        }
        XCTAssertEqual(batches, [[.init(.modified, "/d/log")], [.init(.modified, "/d/log")]], "at 1 s and 2 s")
    }

    func testWritersAreFollowedThroughRenamesAndLetGoWhenRemoved() {
        var settler = settler()
        _ = settler.add(.init(.modified, "/d/a"), now: 0)
        _ = settler.add(.init(.renamed, "/d/b", from: "/d/a"), now: 1)
        XCTAssertEqual(settler.writers, ["/d/b"])
        _ = settler.add(.init(.modified, "/d/sub/c"), now: 2)
        _ = settler.add(.init(.renamed, "/d/moved", from: "/d/sub", directory: true), now: 3)
        XCTAssertEqual(settler.writers, ["/d/b", "/d/moved/c"])
        _ = settler.add(.init(.removed, "/d/b"), now: 4)
        _ = settler.add(.init(.removed, "/d/moved", directory: true), now: 5)
        XCTAssertEqual(settler.writers, [])
        XCTAssertEqual(settler.deadline, 5 + quiet)
    }

    /// `cp` opens the copy with `O_CREAT` and may copy it in one `copy_file_range` call, whose
    /// `IN_MODIFY` comes when it returns: the file is held from its opening.
    func testAFileCreatedAndOpenedIsHeldUntilItIsClosedBeforeItsFirstWrite() {
        var settler = settler()
        _ = settler.add(.init(.created, "/d/copy"), now: 0)
        XCTAssertFalse(settler.add(.init(.opened, "/d/copy"), now: 0), "an open is no change")
        XCTAssertEqual(settler.deadline, maximum)
        _ = settler.add(.init(.modified, "/d/copy"), now: 5_000 * ms)
        _ = settler.add(.init(.writerClosed, "/d/copy"), now: 5_001 * ms)
        XCTAssertEqual(settler.deadline, maximum, "the maximum wait from the first change holds")
        XCTAssertEqual(settler.take(now: maximum), [.init(.created, "/d/copy")])

        // Opened without O_CREAT by a reader that closes: not held beyond the close.
        var reader = self.settler()
        _ = reader.add(.init(.created, "/d/f"), now: 0)
        _ = reader.add(.init(.opened, "/d/f"), now: 0)
        _ = reader.add(.init(.readerClosed, "/d/f"), now: 10)
        XCTAssertEqual(reader.deadline, quiet, "a close that is no change does not move the quiet period")
    }

    /// A hard link, a symbolic link, a fifo: created, never opened, so nothing holds the batch.
    func testAnEntryCreatedWithoutBeingOpenedHoldsNothing() {
        var settler = settler()
        _ = settler.add(.init(.created, "/d/link"), now: 0)
        XCTAssertEqual(settler.deadline, quiet)
        // Opened later by a reader: held only until that reader closes it.
        _ = settler.add(.init(.opened, "/d/link"), now: 100 * ms)
        XCTAssertEqual(settler.deadline, maximum)
        _ = settler.add(.init(.readerClosed, "/d/link"), now: 150 * ms)
        XCTAssertEqual(settler.deadline, quiet)
    }

    func testAnOverflowLetsGoOfTheWriters() {
        var settler = settler()
        _ = settler.add(.init(.modified, "/d/a"), now: 0)
        XCTAssertEqual(settler.deadline, maximum)
        _ = settler.add(.init(.overflow, "/d", directory: true), now: 10)
        XCTAssertEqual(settler.deadline, 10 + quiet, "its close may be among the events lost")
    }

    func testWhatTheWatcherDoesNotReportCountsAsActivityAndIsLeftOut() {
        var settler = settler(reporting: [.created])
        _ = settler.add(.init(.created, "/d/a"), now: 0)
        _ = settler.add(.init(.modified, "/d/b"), now: 200 * ms)
        _ = settler.add(.init(.renamed, "/d/c", from: "/d/a"), now: 250 * ms)
        XCTAssertNil(settler.take(now: 300 * ms), "the write to b kept the watch busy")
        _ = settler.add(.init(.writerClosed, "/d/b"), now: 400 * ms)
        XCTAssertEqual(settler.take(now: 700 * ms), [.init(.created, "/d/c")], "folded, then selected")
    }

    func testAForcedBatchKeepsTheWriters() {
        var settler = settler()
        _ = settler.add(.init(.modified, "/d/a"), now: 0)
        XCTAssertEqual(settler.take(now: 1, force: true), [.init(.modified, "/d/a")])
        XCTAssertEqual(settler.writers, ["/d/a"])
    }
}
