import CDirectoryWatcherShims
import Glibc
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The router without a thread or a kernel: events go in as the loop would read them, batches
/// come out to receivers when the test drains the mailboxes the router scheduled, as the loop does
/// after each wake-up.
final class RouterTests: XCTestCase {
    private var kernel: FakeKernel!
    private var barrierWrites = 0
    private var router: Router!
    private let barrierWD: Int32 = 1_000
    private let window: UInt64 = 10
    /// What listing a directory gives (kept snapshots and rescans), by path: a snapshot or an error.
    private var listings: [String: Result<Snapshot, SyscallError>] = [:]
    /// The directories whose names (and inodes) the router listed, in order.
    private var namesListed: [String] = []
    /// The directories the router listed in full (kept snapshots, rescans), in order.
    private var listed: [String] = []

    override func setUp() {
        kernel = FakeKernel()
        barrierWrites = 0
        listings = [:]
        namesListed = []
        listed = []
        router = Router(
            table: WatchTable(backend: InotifyBackend(fd: 99, system: kernel.system), system: kernel.system),
            pairingWindow: window, barrierWD: barrierWD,
            writeBarrierFile: { [unowned self] () throws(SyscallError) in barrierWrites += 1 },
            listDirectory: { [unowned self] (path) throws(SyscallError) in
                listed.append(path.description)
                return try (listings[path.description] ?? .success(Snapshot())).get()
            },
            listNames: { [unowned self] (path, _) throws(SyscallError) in
                namesListed.append(path.description)
            })
    }

    /// A subscription to `root` that records what reaches it.
    private func subscribe(
        _ root: FileSystemPath, events: DirectoryWatcher.Events = DirectoryWatcher.Options().events,
        entry: WatchedEntry? = nil, keepsSnapshot: Bool = false
    ) throws -> (Subscription, ChangeRecorder) {
        let subscription = Subscription(
            root: root, mask: events.eventMask, entry: entry, target: .mailbox(Mailbox(mayBlock: true)),
            keepsSnapshot: keepsSnapshot)
        let recorder = ChangeRecorder()
        subscription.receiver = recorder
        if let failure = router.subscribe(subscription) { throw failure }
        return (subscription, recorder)
    }

    private func wd(_ path: String) -> Int32 { kernel.descriptors.get()[path]! }

    /// Feeds events read in one wake-up, then ends the wake-up as the loop does.
    private func read(_ events: [BackendEvent], now: UInt64 = 0, drained: Bool = true) {
        for event in events { router.receive(event, now: now) }
        router.expire(now: now)
        router.finishWakeUp(queueDrained: drained)
        deliver()
    }

    /// Runs what the router scheduled, as the loop's leader does.
    private func deliver() {
        for mailbox in router.takeReady() { mailbox.drain() }
    }

    func testEventsReachOnlyTheWatchersOfTheirDirectory() throws {
        let (_, d) = try subscribe("/d")
        let (_, e) = try subscribe("/e")
        read([BackendEvent(wd: wd("/d"), mask: EventMask.create, name: Array("a".utf8))])
        XCTAssertEqual(d.batches, [[DirectoryChange(.created, "/d/a")]])
        XCTAssertEqual(e.batches, [])
    }

    func testOneWakeUpIsOneBatchPerWatcher() throws {
        let (_, d) = try subscribe("/d")
        read([
            BackendEvent(wd: wd("/d"), mask: EventMask.create, name: Array("a".utf8)),
            BackendEvent(wd: wd("/d"), mask: EventMask.modify, name: Array("a".utf8)),
            BackendEvent(wd: wd("/d"), mask: EventMask.modify, name: Array("a".utf8)),
        ])
        // Repeated writes to one file fold into one change.
        XCTAssertEqual(d.batches, [[DirectoryChange(.created, "/d/a"), DirectoryChange(.modified, "/d/a")]])
    }

    func testRenameWithinAWatcherIsOneChange() throws {
        let (_, d) = try subscribe("/d")
        read([
            BackendEvent(wd: wd("/d"), mask: EventMask.movedFrom, cookie: 7, name: Array("a".utf8)),
            BackendEvent(wd: wd("/d"), mask: EventMask.movedTo, cookie: 7, name: Array("b".utf8)),
        ])
        XCTAssertEqual(d.batches, [[DirectoryChange(.renamed, "/d/b", from: "/d/a")]])
    }

    func testMoveBetweenTwoWatchersIsOutForOneAndInWithItsOriginForTheOther() throws {
        let (_, d) = try subscribe("/d")
        let (_, e) = try subscribe("/e")
        read([
            BackendEvent(wd: wd("/d"), mask: EventMask.movedFrom, cookie: 9, name: Array("a".utf8)),
            BackendEvent(wd: wd("/e"), mask: EventMask.movedTo, cookie: 9, name: Array("b".utf8)),
        ])
        XCTAssertEqual(d.batches, [[DirectoryChange(.movedOut, "/d/a")]])
        XCTAssertEqual(e.batches, [[DirectoryChange(.movedIn, "/e/b", from: "/d/a")]])
    }

    func testAMoveWhosePartnerNeverComesIsMovedOutAtTheDeadline() throws {
        let (_, d) = try subscribe("/d")
        read([BackendEvent(wd: wd("/d"), mask: EventMask.movedFrom, cookie: 3, name: Array("a".utf8))], now: 0)
        XCTAssertEqual(d.batches, [], "held while its partner may still come")
        XCTAssertEqual(router.deadline, window)
        read([], now: window)
        XCTAssertEqual(d.batches, [[DirectoryChange(.movedOut, "/d/a")]])
        XCTAssertNil(router.deadline)
    }

    func testRootRemovedEndsTheWatchAndReleasesItsKernelWatch() throws {
        let (subscription, d) = try subscribe("/d")
        let descriptor = wd("/d")
        read([BackendEvent(wd: descriptor, mask: EventMask.deleteSelf)])
        XCTAssertEqual(d.batches, [[DirectoryChange(.rootRemoved, "/d", directory: true)]])
        XCTAssertEqual(d.rootsGone, 1)
        XCTAssertTrue(subscription.loop.isEnded)
        XCTAssertEqual(kernel.calls.get().last, "rm \(descriptor)")
        read([BackendEvent(wd: descriptor, mask: EventMask.create, name: Array("late".utf8))])
        XCTAssertEqual(d.batches.count, 1, "nothing after the end")
    }

    func testAWatchTheKernelDroppedIsReportedAsRemoved() throws {
        let (_, d) = try subscribe("/d")
        read([BackendEvent(wd: wd("/d"), mask: EventMask.ignored)])
        XCTAssertEqual(d.batches, [[DirectoryChange(.rootRemoved, "/d", directory: true)]])
    }

    func testOverflowReachesEveryWatcherAndCompletesBarriersInFlightAfterIt() throws {
        let (d, dRecorder) = try subscribe("/d")
        let (_, eRecorder) = try subscribe("/e")
        let order = LockedValue<[String]>([])
        dRecorder.onBatch = { order.update { $0.append("batch") } }
        router.requestBarrier(for: d) { order.update { $0.append("barrier") } }
        deliver()
        XCTAssertEqual(barrierWrites, 1)
        read([BackendEvent(wd: -1, mask: EventMask.queueOverflow)], drained: false)
        XCTAssertEqual(dRecorder.batches, [[DirectoryChange(.overflow, "/d", directory: true)]])
        XCTAssertEqual(eRecorder.batches, [[DirectoryChange(.overflow, "/e", directory: true)]])
        XCTAssertEqual(order.get(), ["batch"], "the barrier waits for the queue to drain and the rescan")
        read([], drained: true)
        XCTAssertEqual(order.get(), ["batch", "barrier"], "the overflow notice comes before the barrier")
    }

    /// A file as a listing gives it.
    private func entry(inode: UInt64) -> Snapshot.Entry {
        var status = cdw_entry_status()
        status.mode = 0o100644
        status.inode = inode
        return Snapshot.Entry(status)
    }

    func testARescanReachesOnlyTheWatchersThatKeepSnapshots() throws {
        let (_, exact) = try subscribe("/d", keepsSnapshot: true)
        let (_, noticeOnly) = try subscribe("/d")
        listings["/d"] = .success(Snapshot(entries: [Array("new".utf8): entry(inode: 5)]))
        read([BackendEvent(wd: -1, mask: EventMask.queueOverflow)])
        var found = DirectoryChange(.created, "/d/new")
        found.foundByRescan = true
        XCTAssertEqual(exact.batches, [[DirectoryChange(.overflow, "/d", directory: true), found]])
        XCTAssertEqual(noticeOnly.batches, [[DirectoryChange(.overflow, "/d", directory: true)]])
    }

    func testARescanThatCannotListTheDirectorySaysWhyInAFailedChange() throws {
        let (subscription, d) = try subscribe("/d", keepsSnapshot: true)
        listings["/d"] = .failure(SyscallError(function: "open", errno: EACCES))
        read([BackendEvent(wd: -1, mask: EventMask.queueOverflow)])
        let batch = try XCTUnwrap(d.batches.first)
        XCTAssertEqual(batch.map(\.kind), [.overflow, .failed])
        XCTAssertNil(batch[0].error)
        let error = try XCTUnwrap(batch[1].error)
        XCTAssertEqual(error.code, .permissionDenied)
        XCTAssertEqual(error.path, "/d")
        XCTAssertEqual(batch[1].path, FileSystemPath("/d"))
        XCTAssertFalse(subscription.loop.isEnded, "still watching: a later overflow's rescan may succeed")
        // It does: the directory is readable again, and the rescan reports what was missed.
        listings["/d"] = .success(Snapshot(entries: [Array("a".utf8): entry(inode: 7)]))
        read([BackendEvent(wd: -1, mask: EventMask.queueOverflow)])
        var found = DirectoryChange(.created, "/d/a")
        found.foundByRescan = true
        XCTAssertEqual(d.batches.last, [DirectoryChange(.overflow, "/d", directory: true), found])
    }

    func testARescanThatFindsTheDirectoryGoneReportsItRemoved() throws {
        let (subscription, d) = try subscribe("/d", keepsSnapshot: true)
        listings["/d"] = .failure(SyscallError(function: "open", errno: ENOENT))
        read([BackendEvent(wd: -1, mask: EventMask.queueOverflow)])
        var removed = DirectoryChange(.rootRemoved, "/d", directory: true)
        removed.foundByRescan = true
        XCTAssertEqual(d.batches, [[DirectoryChange(.overflow, "/d", directory: true), removed]])
        XCTAssertTrue(subscription.loop.isEnded)
        XCTAssertEqual(d.rootsGone, 1)
    }

    /// A consumer of `/d` with room for one change (an async sequence's buffer), given two files
    /// at once: it has the first, and owes a catch-up. Also returns how to make a creation event.
    private func consumerBehindByOne() throws -> (Subscription, ChangeRecorder, (String) -> BackendEvent) {
        let subscription = Subscription(
            root: "/d", mask: DirectoryWatcher.Options().events.eventMask, target: .mailbox(Mailbox(mayBlock: true)),
            keepsSnapshot: true, limit: 1, strictLimit: true, acknowledgesLater: true)
        let d = ChangeRecorder()
        subscription.receiver = d
        if let failure = router.subscribe(subscription) { throw failure }
        let descriptor = wd("/d")
        let created = { (name: String) in BackendEvent(wd: descriptor, mask: EventMask.create, name: Array(name.utf8))
        }
        read([created("a"), created("b")])
        XCTAssertEqual(d.batches, [[DirectoryChange(.created, "/d/a")]], "what fits in the buffer")
        return (subscription, d, created)
    }

    /// A consumer with room for one change (an async sequence's buffer) takes the first of two
    /// files, and its catch-up runs in a wake-up that also read the creation of a third: that
    /// creation is found by the listing, and reported once, by it, after the notice (before the
    /// fix it also came first, from its event: twice in one batch).
    func testACatchUpDoesNotRepeatTheEventsReadInItsOwnWakeUp() throws {
        let (subscription, d, created) = try consumerBehindByOne()
        // The consumer takes it: the backlog is delivered, and the catch-up is due.
        subscription.acknowledge(1)
        router.backlogDrained(subscription)
        listings["/d"] = .success(
            Snapshot(entries: [
                Array("a".utf8): entry(inode: 1), Array("b".utf8): entry(inode: 2), Array("c".utf8): entry(inode: 3),
            ]))
        read([created("c")])
        var found = DirectoryChange(.created, "/d/c")
        found.foundByRescan = true
        var notice = DirectoryChange(.overflow, "/d", directory: true)
        notice.droppedChanges = 2  // b, and c's event, which the listing reports
        XCTAssertEqual(d.batches.last, [notice, DirectoryChange(.created, "/d/b"), found])
        XCTAssertEqual(d.batches.count, 2)
        // Caught up: the next change comes as it happens, once.
        subscription.acknowledge(3)
        read([created("e")])
        XCTAssertEqual(d.batches.last, [DirectoryChange(.created, "/d/e")])
    }

    /// The same consumer, still behind, paused in a wake-up that read the creation of a third
    /// file: the pause takes the catch-up over, and on resuming the listing reports that file
    /// once (before the fix the pause handed its event over first, so it came twice: once as it
    /// happened, once found on resuming).
    func testAPauseDuringACatchUpDoesNotRepeatTheEventsReadInItsWakeUp() throws {
        let (subscription, d, created) = try consumerBehindByOne()
        // The consumer takes it, and its catch-up is due; in the next wake-up c's event is
        // read, then the pause's task runs.
        subscription.acknowledge(1)
        router.backlogDrained(subscription)
        router.receive(created("c"), now: 0)
        router.pause(subscription)
        router.expire(now: 0)
        router.finishWakeUp(queueDrained: true)
        deliver()
        XCTAssertEqual(d.batches.count, 1, "nothing more is handed over while paused")
        listings["/d"] = .success(
            Snapshot(entries: [
                Array("a".utf8): entry(inode: 1), Array("b".utf8): entry(inode: 2), Array("c".utf8): entry(inode: 3),
            ]))
        router.resume(subscription)
        read([])
        let delivered = d.batches.joined().filter { $0.kind == .created }.map(\.path.description)
        XCTAssertEqual(delivered.sorted(), ["/d/a", "/d/b", "/d/c"], "each file once: \(d.batches)")
        let notices = d.batches.joined().filter { $0.kind == .overflow }
        XCTAssertEqual(notices.count, 1, "one notice: \(d.batches)")
        XCTAssertEqual(notices.first?.droppedChanges, 2, "b, and c's event, which the listing reports")
        XCTAssertEqual(d.batches.count, 2, "what fitted, then the resuming batch: \(d.batches)")
    }

    func testInodesOfCreatedEntriesAreLearntOnceTheLoopIsIdleAndNoMoreOftenThanTheSpacing() throws {
        let (d, _) = try subscribe("/d", keepsSnapshot: true)
        let (_, _) = try subscribe("/e")
        XCTAssertNil(router.deadline, "nothing to learn: no wake-up")
        read([BackendEvent(wd: wd("/d"), mask: EventMask.create, name: Array("a".utf8))], now: 0)
        XCTAssertEqual(router.deadline, InodeLearning.idle)
        // Events keep coming: the idle moment moves, up to the latest.
        var now: UInt64 = 0
        while now + InodeLearning.idle / 2 < InodeLearning.latest {
            now += InodeLearning.idle / 2
            read([BackendEvent(wd: wd("/e"), mask: EventMask.create, name: Array("x".utf8))], now: now)
            XCTAssertEqual(namesListed, [])
        }
        read([], now: InodeLearning.latest)
        XCTAssertEqual(namesListed, ["/d"], "listed at the latest, though events kept coming")
        XCTAssertNil(router.deadline, "then nothing is due: no wake-up")
        read([], now: InodeLearning.latest * 2)
        XCTAssertEqual(namesListed, ["/d"])

        // A barrier does not list: it stays cheap however large the directory.
        let start = InodeLearning.latest * 3
        read([BackendEvent(wd: wd("/d"), mask: EventMask.create, name: Array("b".utf8))], now: start)
        router.requestBarrier(for: d) {}
        read([BackendEvent(wd: barrierWD, mask: EventMask.attributes)], now: start + 1)
        XCTAssertEqual(namesListed, ["/d"])
        read([], now: start + InodeLearning.idle + 1)
        XCTAssertEqual(namesListed, ["/d", "/d"], "idle: listed")
    }

    func testAFewNewNamesAmongManyHaveTheirInodesReadOneByOneAndAFailedReadIsListedInstead() throws {
        // Files born long before the names are read: each inode learnt is vouched for.
        router.services.wallClock = { Snapshot.Time(seconds: 100, nanoseconds: 0) }
        router.services.birthClock = { Snapshot.Time(seconds: 200, nanoseconds: 0) }
        var statused: [[String]] = []
        var statusFails = false
        router.services.readInodes = { (_, names, visit) throws(SyscallError) in
            statused.append(names.map { String(decoding: $0, as: UTF8.self) })
            if statusFails { throw SyscallError(function: "statx", errno: EACCES) }
            for name in names { visit(name[...], 100) }
        }
        var onDisk: [String] = []
        router.services.listNames = { [unowned self] (path, visit) throws(SyscallError) in
            namesListed.append(path.description)
            for name in onDisk { visit(Array(name.utf8)[...], 200, .file) }
        }
        var listedEntries: [[UInt8]: Snapshot.Entry] = [:]
        for index in 0..<8 { listedEntries[Array("old-\(index)".utf8)] = entry(inode: UInt64(index + 1)) }
        listings["/d"] = .success(Snapshot(entries: listedEntries))
        _ = try subscribe("/d", keepsSnapshot: true)
        func create(_ names: [String], at now: UInt64) {
            onDisk += names
            read(names.map { BackendEvent(wd: wd("/d"), mask: EventMask.create, name: Array($0.utf8)) }, now: now)
            read([], now: now + InodeLearning.idle)
        }
        // One name lacking among nine entries: its status is read, the directory is not listed.
        create(["a"], at: 0)
        XCTAssertEqual(statused, [["a"]])
        XCTAssertEqual(namesListed, [])
        // Four among thirteen, over a quarter: listed.
        create(["b", "c", "d", "e"], at: InodeLearning.latest * 2)
        XCTAssertEqual(statused, [["a"]])
        XCTAssertEqual(namesListed, ["/d"])
        // One among fourteen whose status cannot be read (a directory read but not searched):
        // listed after all.
        statusFails = true
        create(["f"], at: InodeLearning.latest * 4)
        XCTAssertEqual(statused, [["a"], ["f"]])
        XCTAssertEqual(namesListed, ["/d", "/d"])
        XCTAssertNil(router.deadline, "every inode learnt: nothing more is due")
    }

    func testABarrierCompletesWhenItsEventIsReadAfterTheChangesBeforeIt() throws {
        let (d, recorder) = try subscribe("/d")
        let order = LockedValue<[String]>([])
        recorder.onBatch = { order.update { $0.append("batch") } }
        router.requestBarrier(for: d) { order.update { $0.append("first") } }
        router.requestBarrier(for: d) { order.update { $0.append("second") } }
        deliver()
        XCTAssertEqual(barrierWrites, 1, "one write in flight at a time")
        read([
            BackendEvent(wd: wd("/d"), mask: EventMask.create, name: Array("a".utf8)),
            BackendEvent(wd: barrierWD, mask: EventMask.attributes),
        ])
        XCTAssertEqual(order.get(), ["batch", "first"])
        XCTAssertEqual(barrierWrites, 2, "written again for the one that waited")
        read([BackendEvent(wd: barrierWD, mask: EventMask.attributes)])
        XCTAssertEqual(order.get(), ["batch", "first", "second"])
    }

    func testAFailingBarrierWriteStillCompletes() throws {
        router = Router(
            table: WatchTable(backend: InotifyBackend(fd: 99, system: kernel.system), system: kernel.system),
            pairingWindow: window, barrierWD: barrierWD,
            writeBarrierFile: { () throws(SyscallError) in throw SyscallError(function: "futimens", errno: EIO) })
        let (d, _) = try subscribe("/d")
        let completed = LockedValue(0)
        router.requestBarrier(for: d) { completed.update { $0 += 1 } }
        router.requestBarrier(for: d) { completed.update { $0 += 1 } }
        deliver()
        XCTAssertEqual(completed.get(), 2)
    }

    func testAFileWatchSeesOnlyItsName() throws {
        let (_, file) = try subscribe("/d", entry: WatchedEntry(name: Array("config".utf8), path: "/d/config"))
        let descriptor = wd("/d")
        read([
            BackendEvent(wd: descriptor, mask: EventMask.create, name: Array("other".utf8)),
            BackendEvent(wd: descriptor, mask: EventMask.movedFrom, cookie: 5, name: Array("config.tmp".utf8)),
            BackendEvent(wd: descriptor, mask: EventMask.movedTo, cookie: 5, name: Array("config".utf8)),
        ])
        XCTAssertEqual(file.batches, [[DirectoryChange(.renamed, "/d/config", from: "/d/config.tmp")]])
    }

    /// A file as a listing gives it, with its times.
    private func entry(inode: UInt64, time: Int64) -> Snapshot.Entry {
        var status = cdw_entry_status()
        status.mode = 0o100644
        status.inode = inode
        status.mask = 0x800  // STATX_BTIME
        status.born_seconds = time
        status.modified_seconds = time
        status.changed_seconds = time
        return Snapshot.Entry(status)
    }

    /// Subscribes a watcher that keeps snapshots, leaving the first listing to the test.
    private func subscribeDeferring(_ root: String) throws -> (Router.ListingRequest, ChangeRecorder) {
        let subscription = Subscription(
            root: FileSystemPath(root), mask: DirectoryWatcher.Options().events.eventMask,
            target: .mailbox(Mailbox(mayBlock: true)), keepsSnapshot: true)
        let recorder = ChangeRecorder()
        subscription.receiver = recorder
        let request = try XCTUnwrap(try router.subscribeDeferringListing(subscription).get())
        XCTAssertEqual(listed, [], "the loop lists nothing itself")
        return (request, recorder)
    }

    func testADeferredListingGetsTheEventsRoutedWhileItWasRead() throws {
        let before = Snapshot(entries: [
            Array("old".utf8): entry(inode: 5, time: 1), Array("a".utf8): entry(inode: 7, time: 1),
        ])
        let after = Snapshot(entries: [
            Array("new".utf8): entry(inode: 9, time: 2), Array("b".utf8): entry(inode: 7, time: 1),
        ])
        // Read before the events, or after them: either way what is kept is the directory now.
        for listing in [before, after] {
            setUp()
            let (request, recorder) = try subscribeDeferring("/d")
            let d = wd("/d")
            read([
                BackendEvent(wd: d, mask: EventMask.create, name: Array("new".utf8)),
                BackendEvent(wd: d, mask: EventMask.delete, name: Array("old".utf8)),
                BackendEvent(wd: d, mask: EventMask.movedFrom, cookie: 3, name: Array("a".utf8)),
                BackendEvent(wd: d, mask: EventMask.movedTo, cookie: 3, name: Array("b".utf8)),
            ])
            router.install(listing, for: request)
            listings["/d"] = .success(after)
            read([BackendEvent(wd: -1, mask: EventMask.queueOverflow)])
            XCTAssertEqual(
                recorder.batches.last, [DirectoryChange(.overflow, "/d", directory: true)],
                "nothing missed, nothing twice")
        }
    }

    func testAnOverflowWhileTheListingIsReadIsFollowedByARescan() throws {
        let (request, recorder) = try subscribeDeferring("/d")
        read([BackendEvent(wd: -1, mask: EventMask.queueOverflow)])
        XCTAssertEqual(listed, [], "nothing to rescan yet")
        router.install(Snapshot(), for: request)
        listings["/d"] = .success(Snapshot(entries: [Array("lost".utf8): entry(inode: 4, time: 1)]))
        read([])
        var found = DirectoryChange(.created, "/d/lost")
        found.foundByRescan = true
        XCTAssertEqual(recorder.batches, [[DirectoryChange(.overflow, "/d", directory: true)], [found]])
    }

    func testAKeptDirectoryIsDroppedWithItsLastWatcherThatKeepsSnapshots() throws {
        let (exact, _) = try subscribe("/d", keepsSnapshot: true)
        let (_, noticeOnly) = try subscribe("/d")
        XCTAssertEqual(listed, ["/d"], "listed once, when the first watcher that keeps snapshots came")
        router.unsubscribe(exact)
        read([BackendEvent(wd: -1, mask: EventMask.queueOverflow)])
        XCTAssertEqual(listed, ["/d"], "nothing kept, nothing listed again")
        XCTAssertEqual(noticeOnly.batches, [[DirectoryChange(.overflow, "/d", directory: true)]])
        _ = try subscribe("/d", keepsSnapshot: true)
        XCTAssertEqual(listed, ["/d", "/d"], "a new one lists afresh")
    }

    func testUnsubscribingDropsThePendingBatchAndTheKernelWatch() throws {
        let (d, recorder) = try subscribe("/d")
        let descriptor = wd("/d")
        router.receive(BackendEvent(wd: descriptor, mask: EventMask.create, name: Array("a".utf8)), now: 0)
        router.unsubscribe(d)
        router.finishWakeUp(queueDrained: true)
        deliver()
        XCTAssertEqual(recorder.batches, [])
        XCTAssertEqual(kernel.calls.get().last, "rm \(descriptor)")
    }

    func testTearDownCompletesEveryBarrier() throws {
        let (d, _) = try subscribe("/d")
        let completed = LockedValue(0)
        router.requestBarrier(for: d) { completed.update { $0 += 1 } }
        router.requestBarrier(for: d) { completed.update { $0 += 1 } }
        deliver()
        router.tearDown()
        deliver()
        XCTAssertEqual(completed.get(), 2)
    }
}
