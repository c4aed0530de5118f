import Dispatch
import Glibc

/// Routes the kernel's events to the watchers: owns the watch table, rename pairing and each
/// watcher's batch for the current wake-up; it hands batches to mailboxes and queues, and tells
/// the loop which mailboxes it must now drain (``takeReady()``).
///
/// The event loop feeds it (events read, the pairing deadline, the end of a wake-up) and runs its
/// tasks (subscribe, unsubscribe, barrier). The router has no thread. Its system calls all go
/// through the replaceable table its watch table holds (watches, marks, and looking at the disk:
/// a directory's entries, an entry's status, a fanotify handle opened) or through what the loop
/// gives it (``RouterServices``: listings, the barrier write), so its tests drive it directly
/// against a fake kernel. Its state is in parts with one job each (``BarrierBook``,
/// ``InodeLearning``, ``ExchangeHold``, ``RouterListings``, ``Outbox``, ``TimedWatchers``,
/// ``MountFollowing``, ``FanotifyRouting``). Every method runs on the loop's leading thread
/// (see Leadership), which ``RouterServices/isOnLoopThread`` checks in debug builds.
final class Router {
    /// A barrier waiting for its event, and where its completion runs.
    struct BarrierRequest {
        let subscription: Subscription
        let completion: @Sendable () -> Void
    }

    /// Marks an event read that cannot be trusted (a read error, a truncated record): reported as
    /// possible loss, as an overflow is.
    static let lossMarker = InotifyEvent(wd: -1, mask: InotifyMask.queueOverflow)

    // Every property below is touched by the loop's leader alone (the router checks it is on
    // that thread), so the runtime's exclusivity checks would only cost time: four of them per
    // event routed, about 300 instructions, a tenth of the library's work per change.

    /// The system calls, clocks and hooks the loop gives the router.
    @exclusivity(unchecked) var services: RouterServices
    @exclusivity(unchecked) var table: WatchTable<Subscription>
    @exclusivity(unchecked) var subscriptions: [ObjectIdentifier: Subscription] = [:]
    @exclusivity(unchecked) private(set) var pairing: MovePairing
    /// Every barrier not completed yet, with what each waits for.
    @exclusivity(unchecked) private var barriers = BarrierBook<BarrierRequest>()
    /// What this wake-up hands over: batches, mailboxes to drain, watch-limit notices.
    @exclusivity(unchecked) var outbox = Outbox()
    /// What the watchers have been told of each kernel-watched directory whose watchers keep
    /// snapshots (``Subscription/keepsSnapshot``), by watch descriptor.
    @exclusivity(unchecked) var known = ByDescriptor<KnownDirectory>()
    /// The settling and polled watchers, whose deadlines the loop sleeps to.
    @exclusivity(unchecked) var timed = TimedWatchers()
    /// The time of the read or deadline being handled.
    @exclusivity(unchecked) private var time = ReadTime()
    /// The monotonic time of the read or deadline being handled.
    var now: UInt64 { time.now }
    /// The wall-clock time of the read being routed.
    var wallNow: Snapshot.Time { time.wall }
    /// The router's listings: owed (rescans, catch-ups, resumes), being read, and just made.
    @exclusivity(unchecked) var listings = RouterListings()
    /// Kept directories with entries whose inode is not on record (``KnownDirectory/lacksInodes``),
    /// and when to list them.
    @exclusivity(unchecked) private var learning = InodeLearning()
    /// The mount table while trees follow it (``Router+Mounts``).
    @exclusivity(unchecked) var mountFollowing = MountFollowing()
    /// The trees watched through fanotify (``Router+Fanotify``).
    @exclusivity(unchecked) var fanotify: FanotifyRouting
    /// What may be the first half of an exchange, held back (``Router+Exchanges``).
    @exclusivity(unchecked) var held = ExchangeHold()

    init(
        table: WatchTable<Subscription>, pairingWindow: UInt64, barrierWD: Int32,
        writeBarrierFile: @escaping () throws(SyscallError) -> Void,
        isOnLoopThread: @escaping () -> Bool = { true },
        wakeForCatchUp: @escaping @Sendable (Subscription) -> Void = { _ in },
        listDirectory: @escaping (FileSystemPath) throws(SyscallError) -> Snapshot = { _ throws(SyscallError) in
            Snapshot()
        },
        listNames: @escaping RouterServices.NameLister = { _, _ throws(SyscallError) in },
        wallClock: @escaping () -> Snapshot.Time = System.wallClockNow,
        birthClock: @escaping () -> Snapshot.Time = System.coarseWallClockNow,
        clock: @escaping () -> UInt64 = System.monotonicNow, inotifyUnavailable: SyscallError? = nil,
        isUnchanged: @escaping (FileSystemPath, Snapshot) throws(SyscallError) -> Bool = { _, _ throws(SyscallError) in
            false
        }
    ) {
        self.services = RouterServices(
            listDirectory: listDirectory, listNames: listNames, isUnchanged: isUnchanged, wallClock: wallClock,
            birthClock: birthClock, clock: clock, barrierWD: barrierWD, writeBarrierFile: writeBarrierFile,
            inotifyUnavailable: inotifyUnavailable, isOnLoopThread: isOnLoopThread, wakeForCatchUp: wakeForCatchUp)
        self.table = table
        self.fanotify = FanotifyRouting(marks: FanotifyMarks(system: table.system))
        self.pairing = MovePairing(window: pairingWindow)
    }

    /// When the loop must call ``expire(now:)``: a rename's first half stops waiting for its
    /// second, a settling watcher's batch is due, or directories are due to have their inodes
    /// learnt.
    var deadline: UInt64? {
        var earliest = pairing.deadline
        if held.isHolding { earliest = min(earliest ?? .max, held.deadline) }
        if let due = learning.deadline { earliest = min(earliest ?? .max, due) }
        for subscription in timed.settling {
            if let due = subscription.loop.settler?.deadline { earliest = min(earliest ?? .max, due) }
        }
        for subscription in timed.polled where subscription.loop.pause == nil {
            if let due = subscription.loop.polled?.schedule.due { earliest = min(earliest ?? .max, due) }
        }
        // Directories of a fanotify tree still to list: at once, after the events read.
        if !fanotify.snapshotQueue.isEmpty { earliest = 0 }
        return earliest
    }

    /// The mailboxes scheduled since the last call, for the loop to drain in this order.
    func takeReady() -> [Mailbox] {
        assert(services.isOnLoopThread())
        defer { outbox.ready.removeAll(keepingCapacity: true) }
        return outbox.ready
    }

    // MARK: - From the loop

    /// One event read from the kernel, at `now`.
    func receive(_ event: InotifyEvent, now: UInt64) {
        assert(services.isOnLoopThread())
        beginRead(now: now)
        // Most events pass straight through: nothing is held back and this is no rename's first
        // half (a second half finds no partner while nothing is held).
        if pairing.isEmpty && !held.isHolding
            && !(event.has(InotifyMask.movedFrom | InotifyMask.movedTo) && event.cookie != 0)
        {
            handle(event)
        } else {
            pairing.push(event, now: now) { handle($0) }
        }
    }

    /// The clocks for an event read at `now`: the wall clock once per read (the events of one read
    /// share `now`), for kept snapshots.
    func beginRead(now: UInt64) {
        if now != time.wallRead {
            time.wallRead = now
            time.wall = services.wallClock()
        }
        learning.eventRead(at: now)
        time.now = now
    }

    /// Lets go of rename halves whose partner did not come in time, and learns the inodes of
    /// entries events created once the loop has had a moment.
    func expire(now: UInt64) {
        assert(services.isOnLoopThread())
        time.now = now
        if !timed.polled.isEmpty { pollDue() }
        if !fanotify.snapshotQueue.isEmpty { continueSnapshots() }
        if !timed.settling.isEmpty { releaseSettled() }
        if let arrival = held.arrival, now >= held.deadline, !pairing.isEmpty {
            // The departure an exchange with a place not watched brings after it waits for a
            // partner it will not get: it comes first (``route(_:)``), not after its window.
            pairing.giveUp(where: { isDeparture($0, before: arrival) }) { handle($0) }
        }
        if held.isHolding, now >= held.deadline { releaseHeldMove() }
        if let deadline = pairing.deadline, now >= deadline {
            pairing.expire(now: now) { handle($0) }
        }
        if let due = learning.deadline, now >= due { learnInodes(at: now) }
    }

    /// After every wake-up: releases barriers that waited for an overflow to drain, and hands the
    /// batches to their queues. `queueDrained`: the last read found the kernel queue empty.
    func finishWakeUp(queueDrained: Bool) {
        assert(services.isOnLoopThread())
        // (A held move waits for its deadline, or the next event: the barrier's own, for one.)
        let holding = !pairing.isEmpty || held.isHolding
        if queueDrained && listings.rescanOwed && !holding {
            listings.rescanOwed = false
            rescan(known.keys, afterKernelOverflow: true)
            complete(barriers.take(.rescan))
        }
        if queueDrained && !listings.catchUps.isEmpty && !holding {
            let due = listings.catchUps
            listings.catchUps = []
            var descriptors: Set<Int32> = []
            for subscription in due where !subscription.loop.isEnded {
                descriptors.formUnion(subscription.loop.descriptors)
            }
            rescan(Array(descriptors), afterKernelOverflow: false)
            if !listings.rescanOwed {
                complete(barriers.take(.rescan))
            }
        }
        if queueDrained && !listings.resumes.isEmpty && !holding { resumeDue() }
        if queueDrained && pairing.isEmpty && barriers.drained() { writeBarrier() }
        flushBatches()
    }

    /// The loop is stopping: hands over what is pending, completes every barrier, forgets every
    /// subscription (closing the inotify descriptor removes the kernel watches).
    func tearDown() {
        assert(services.isOnLoopThread())
        if held.isHolding { releaseHeldMove() }
        let leftover = barriers.takeAll()
        listings.resumes = []
        timed.settling = []
        flushBatches()
        for request in leftover { schedule(request.subscription.run(request.completion)) }
        subscriptions = [:]
        fanotify.snapshotQueue = []
        fanotify.trees = []
        fanotify.marks.closeAll()
        mountFollowing.trees = []
        mountFollowing.table = nil  // (the loop closes the poll's descriptor with its others)
    }

    // MARK: - Tasks

    /// A directory to list off the loop, and where the listing goes (``install(_:for:)``).
    struct ListingRequest: Sendable {
        let wd: Int32
        let path: FileSystemPath
    }

    /// The events routed for a kept directory while its first listing is read elsewhere.
    struct PendingListing {
        enum Step {
            case event(InotifyEvent)
            case renamed(from: ArraySlice<UInt8>, to: ArraySlice<UInt8>, isDirectory: Bool)
            case movedOut(ArraySlice<UInt8>)
            case movedIn(ArraySlice<UInt8>, isDirectory: Bool)
            case exchanged(ArraySlice<UInt8>, ArraySlice<UInt8>)
        }

        var steps: [Step] = []
        var overflowed = false
    }

    /// Subscribes, listing a kept directory at once, on the loop.
    func subscribe(_ subscription: Subscription) -> SyscallError? {
        switch subscribe(subscription, deferringListing: false) {
        case .success: return nil
        case .failure(let error): return error
        }
    }

    /// Subscribes, leaving a kept directory's first listing to the caller, so that listing a
    /// huge directory holds up only the thread that asked to watch it: the caller lists the
    /// request's directory and hands the listing to ``install(_:for:)``. Meanwhile the events
    /// about the directory are kept, and applied to the listing when it arrives.
    func subscribeDeferringListing(_ subscription: Subscription) -> Result<ListingRequest?, SyscallError> {
        subscribe(subscription, deferringListing: true)
    }

    private func subscribe(_ subscription: Subscription, deferringListing: Bool) -> Result<
        ListingRequest?, SyscallError
    > {
        assert(services.isOnLoopThread())
        // Stopped before this task ran: its unsubscribe came first, and would leave it here.
        guard subscription.gate.isOpen else { return .success(nil) }
        if subscription.pollingInterval != nil {
            do {
                try subscribePolled(subscription)
            } catch {
                return .failure(error)
            }
            return .success(nil)
        }
        if subscription.fanotify != .no {
            do throws(SyscallError) {
                try subscribeFanotify(subscription)
                return .success(nil)
            } catch {
                if subscription.fanotify == .required { return .failure(error) }
                subscription.loop.fanotifyRefusal = error.detail ?? error.description
            }
        }
        if let unavailable = services.inotifyUnavailable { return .failure(unavailable) }
        do {
            // A kept snapshot follows every change of name, whatever the watcher selected.
            let names = subscription.keepsSnapshot ? InotifyMask.names : 0
            let wd = try table.add(
                subscription, directory: subscription.root, mask: subscription.mask,
                flags: InotifyMask.onlyDirectory | InotifyMask.excludeUnlinked | names, only: subscription.entry,
                node: { wd in
                    guard subscription.recursive else { return nil }
                    let tree = WatchedTree(rootPath: subscription.root, wd: wd)
                    subscription.loop.tree = tree
                    return tree.root
                })
            subscription.loop.descriptors = [wd]
            admit(subscription)
            // A tree is walked here, on the loop: each directory is watched before it is listed.
            if let tree = subscription.loop.tree {
                followMounts(subscription, from: mountTableNow())
                populate(tree.root, of: tree, for: subscription, reporting: false, foundByRescan: false)
                return .success(nil)
            }
            // The directory as it is when watching starts; without it (unreadable), an overflow is
            // reported as a notice only.
            guard subscription.keepsSnapshot && known[wd] == nil && listings.pending[wd] == nil else {
                return .success(nil)
            }
            if deferringListing {
                listings.pending[wd] = PendingListing()
                expectListingEcho(wd)
                return .success(ListingRequest(wd: wd, path: subscription.root))
            }
            if let snapshot = list(subscription.root, wd: wd) { known[wd] = KnownDirectory(snapshot) }
            return .success(nil)
        } catch {
            return .failure(error)
        }
    }

    /// Records a subscription whose watches are in place.
    func admit(_ subscription: Subscription) {
        subscriptions[ObjectIdentifier(subscription)] = subscription
        if subscription.keepsSnapshot {
            let wake = services.wakeForCatchUp
            subscription.onBacklogDrained = { [weak subscription] in
                if let subscription { wake(subscription) }
            }
        }
    }

    /// The listing a ``subscribeDeferringListing(_:)`` caller read (nil: the directory could not
    /// be read), with the events routed since applied to it in order. Applying an event the
    /// listing already shows changes nothing (a creation of a name it holds, a removal of one it
    /// does not), so it does not matter when the listing was read. An overflow meanwhile is
    /// followed by a rescan.
    func install(_ snapshot: Snapshot?, for request: ListingRequest) {
        assert(services.isOnLoopThread())
        guard let pending = listings.pending.removeValue(forKey: request.wd), let snapshot,
            table.watches(request.wd).contains(where: { $0.subscriber.keepsSnapshot && !$0.subscriber.loop.isEnded })
        else { return }
        let directory = KnownDirectory(snapshot)
        for step in pending.steps {
            switch step {
            case .event(let event): _ = directory.apply(event, at: wallNow)
            case .renamed(let from, let to, let isDirectory):
                if directory.contains(from) {
                    directory.renamed(from: from, to: to, isDirectory: isDirectory, at: wallNow)
                } else if !directory.contains(to) {
                    directory.putIn(to, nil, isDirectory: isDirectory, at: wallNow)
                }
            case .movedOut(let name): _ = directory.takeOut(name)
            case .exchanged(let first, let second):
                if directory.contains(first) && directory.contains(second) { directory.exchange(first, second) }
            case .movedIn(let name, let isDirectory):
                directory.putIn(name, nil, isDirectory: isDirectory, at: wallNow)
            }
        }
        known[request.wd] = directory
        if directory.lacksInodes { lacksInodes(request.wd, directory) }
        if pending.overflowed { listings.rescanOwed = true }
    }

    func unsubscribe(_ subscription: Subscription) {
        assert(services.isOnLoopThread())
        guard subscriptions.removeValue(forKey: ObjectIdentifier(subscription)) != nil else { return }
        if !subscription.loop.isEnded { end(subscription) }
        subscription.loop.catchUp = nil
        subscription.loop.pause = nil
        // Nothing of this wake-up is handed over: not even an empty batch to its queue.
        subscription.loop.pending = []
        outbox.dirty.removeAll { $0 === subscription }
        timed.settling.removeAll { $0 === subscription }
        listings.resumes.removeAll { $0 === subscription }
        complete(barriers.take(allOf: ObjectIdentifier(subscription)))
    }

    // MARK: - Pausing

    /// Pauses a watcher: what it has been told of its directories is kept, and its changes are no
    /// longer collected, only which directories had events (see ``resume(_:)``). What waited to
    /// be handed over (pending, or settling) is handed over now: it happened before the pause.
    func pause(_ subscription: Subscription) {
        assert(services.isOnLoopThread())
        if subscription.loop.pause?.isDue == true {
            // Paused again before its resuming listings: it stays paused, as it was.
            subscription.loop.pause?.isDue = false
            listings.resumes.removeAll { $0 === subscription }
            complete(barriers.take(.resume(ObjectIdentifier(subscription))))
            return
        }
        guard subscription.loop.pause == nil, !subscription.loop.isEnded,
            subscriptions[ObjectIdentifier(subscription)] === subscription
        else { return }
        if subscription.loop.settler != nil {
            release(subscription, force: true)
            subscription.loop.settler?.forgetWriters()
        }
        var pause = Subscription.Pause(baseline: [:])
        if var catchUp = subscription.loop.catchUp {
            // Owed a catch-up: what it was told is what it knew when its backlog overflowed, and
            // the changes it missed since are found on resuming, with every directory listed.
            // Those collected in this wake-up are among them, as a catch-up's own are
            // (``takeCatchUp(_:)``): handed over now too, they would come twice.
            if !subscription.loop.pending.isEmpty {
                catchUp.dropped += subscription.loop.pending.count
                subscription.loop.pending = []
                outbox.dirty.removeAll { $0 === subscription }
            }
            subscription.loop.catchUp = nil
            // No longer owed: a backlog that overflows again after the pause owes a catch-up of
            // its own (while still marked overflowing, its changes would be dropped for good).
            subscription.loop.isOverflowing = false
            listings.catchUps.removeAll { $0 === subscription }
            pause.baseline = catchUp.baseline
            pause.lostEvents = true
            pause.owed =
                [
                    DirectoryChange(
                        kind: .overflow, path: subscription.root, isDirectory: true,
                        droppedChanges: catchUp.remainder.count + catchUp.dropped)
                ] + catchUp.remainder
            complete(barriers.take(.catchUp(ObjectIdentifier(subscription))))
        }
        for wd in subscription.loop.descriptors where pause.baseline[wd] == nil {
            if let directory = known[wd] { pause.baseline[wd] = directory.entries }
        }
        flushBatches()
        subscription.loop.pause = pause
    }

    /// Ends a watcher's pause: hands over one batch, what changed while it was paused (possibly
    /// nothing), marked ``DirectoryChange/whilePaused``. Only directories that had events are
    /// listed, once the kernel queue is drained (what it still holds would otherwise be reported
    /// twice); with none, the batch goes at once, with no system call.
    func resume(_ subscription: Subscription) {
        assert(services.isOnLoopThread())
        guard var pause = subscription.loop.pause else {
            // Not paused here (ended meanwhile): the front end's pause still ends.
            schedule(subscription.handOverResumed([]))
            return
        }
        guard !pause.isDue else { return }
        if subscription.loop.polled != nil {
            // A poll says what changed while paused: nothing was polled meanwhile.
            subscription.loop.pause = nil
            var found = poll(subscription, now: services.clock())
            for index in found.indices { found[index].whilePaused = true }
            let ending = found.filter(ChangeTranslation.endsWatch)
            found.removeAll(where: ChangeTranslation.endsWatch)
            schedule(subscription.handOverResumed(pause.owed + found))
            for change in ending { collect(change, for: subscription) }
            return
        }
        let descriptors = subscription.loop.descriptors
        let changed = pause.lostEvents || descriptors.contains { pause.touched.contains($0) }
        guard subscription.keepsSnapshot, !subscription.loop.isEnded,
            pause.lostEvents || descriptors.contains(where: { pause.touched.contains($0) || pause.baseline[$0] == nil })
        else {
            // Nothing to list: a watcher without snapshots is told to list again itself.
            if !subscription.keepsSnapshot && changed && !subscription.loop.isEnded {
                pause.owed.append(DirectoryChange(kind: .overflow, path: subscription.root, isDirectory: true))
            }
            subscription.loop.pause = nil
            schedule(subscription.handOverResumed(pause.owed))
            return
        }
        pause.isDue = true
        subscription.loop.pause = pause
        listings.resumes.append(subscription)
    }

    /// Lists the directories of the resuming watchers that changed while they were paused, and
    /// hands each its resuming batch.
    private func resumeDue() {
        let due = listings.resumes
        listings.resumes = []
        var descriptors: Set<Int32> = []
        for subscription in due where !subscription.loop.isEnded {
            guard let pause = subscription.loop.pause else { continue }
            for wd in subscription.loop.descriptors
            where pause.lostEvents || pause.touched.contains(wd) || pause.baseline[wd] == nil {
                descriptors.insert(wd)
            }
        }
        rescan(Array(descriptors), afterKernelOverflow: false, takingCatchUps: false)
        for subscription in due {
            guard let pause = subscription.loop.pause, pause.isDue else { continue }
            subscription.loop.pause = nil
            schedule(subscription.handOverResumed(pause.owed + pause.found))
            complete(barriers.take(.resume(ObjectIdentifier(subscription))))
            // Through collect, behind that batch: a directory gone ends the watch.
            if let failure = pause.failure { collect(failureNotice(failure, for: subscription), for: subscription) }
        }
    }

    /// What a listing found of what changed in one directory of a resuming watcher since it
    /// paused, as far as the watcher selected and covers it. Its tree is up to date already: the
    /// events kept it so while it was paused.
    private func found(_ differences: [Snapshot.Difference], by watch: WatchTable<Subscription>.Watch) {
        let subscription = watch.subscriber
        for difference in differences {
            guard ChangeTranslation.selects(watch.mask, difference.kind),
                watch.covers(difference.name[...]) || (difference.oldName.map { watch.covers($0[...]) } ?? false)
            else { continue }
            let change = DirectoryChange(
                kind: difference.kind, path: watch.path(of: difference.name[...]),
                oldPath: difference.oldName.map { watch.path(of: $0[...]) },
                isDirectory: difference.isDirectory, whilePaused: true)
            if let exclusions = subscription.exclusions, exclusions.excludes(change, under: subscription.root) {
                continue
            }
            subscription.loop.pause?.found.append(change)
        }
    }

    /// Lists the directories lacking inodes now, as the loop does once it has been idle (tests:
    /// what the idle listing learns, without waiting for the loop to be idle).
    func learnInodesNow() {
        assert(services.isOnLoopThread())
        if !learning.isEmpty { learnInodes(at: nil) }
    }

    /// A watcher's overflowed backlog has been delivered: its catch-up is due once the kernel
    /// queue is drained.
    func backlogDrained(_ subscription: Subscription) {
        assert(services.isOnLoopThread())
        guard subscription.loop.catchUp != nil, !subscription.loop.isEnded,
            subscriptions[ObjectIdentifier(subscription)] === subscription
        else { return }
        subscription.loop.catchUp?.isDue = true
        listings.catchUps.append(subscription)
    }

    func requestBarrier(for subscription: Subscription, completion: @escaping @Sendable () -> Void) {
        assert(services.isOnLoopThread())
        let request = BarrierRequest(subscription: subscription, completion: completion)
        // A mount made before the barrier was asked for, whose poll the loop has not read yet.
        if mountFollowing.table != nil, services.mountPollFired() { mountTableChanged(now: services.clock()) }
        if subscription.loop.isEnded {
            complete([request])
        } else if subscription.loop.polled != nil {
            // A polled watcher knows of a change once it polls: the barrier polls at once, and
            // completes behind what that found.
            if subscription.loop.pause == nil { pollAndCollect(subscription, now: services.clock()) }
            complete([request])
        } else if subscription.loop.fanotifyID != nil {
            // The kernel queues an event before the call that made it returns: once the group's
            // queue has been read to its end, every change made before this request is routed.
            services.drainFanotify()
            // Every record before the request is read: an exchange's other half would be among them.
            if held.isHolding { releaseHeldMove() }
            if listings.rescanOwed {
                barriers.wait(request, for: .rescan)
            } else {
                complete([request])
            }
        } else if barriers.request(request) {
            writeBarrier()
        }
    }

    // MARK: - Events (never touch `pairing` here: it is mid-push)

    func handle(_ item: MovePairing.Item) {
        switch item {
        case .event(let event): route(event)
        case .move(let from, let to): route(move: from, to: to)
        }
    }

    func handle(_ event: InotifyEvent) {
        // The next event came: a move held for its mirror image has none. (Unless it is the
        // moved directory's own event, which the kernel queues between an exchange's halves.)
        if held.isHolding, !(event.name.isEmpty && event.has(InotifyMask.moveSelf)) {
            releaseHeldMove()
        }
        if event.wd == -1 {
            if event.isOverflow { overflowed() }
            return
        }
        if event.wd == services.barrierWD {
            if event.has(InotifyMask.attributes) { barrierReached() }
            return
        }
        if event.has(InotifyMask.ignored) {
            // The kernel dropped the watch (directory gone, file system unmounted). A subscriber
            // still here did not see DELETE_SELF, so tell it now.
            known[event.wd] = nil
            listings.pending[event.wd] = nil
            for watch in table.kernelDropped(event.wd) where !watch.subscriber.loop.isEnded {
                if let node = watch.node, !node.isRoot {
                    // A directory inside a tree: its parent reported it; what was below it goes.
                    if let tree = watch.subscriber.loop.tree, tree.node(node.wd) === node {
                        for wd in tree.remove(node).dropFirst() { release(wd, for: watch.subscriber) }
                    }
                    continue
                }
                collect(
                    DirectoryChange(kind: .rootRemoved, path: watch.directory, isDirectory: true), for: watch.subscriber
                )
            }
            return
        }
        if !listings.echoes.isEmpty, isListingEcho(event) { return }
        // What a rescan reported already is not reported again when the kernel's event follows.
        if !listings.pending.isEmpty && !event.name.isEmpty && listings.pending[event.wd] != nil {
            listings.pending[event.wd]?.steps.append(.event(event))
        }
        if !event.name.isEmpty, let directory = known[event.wd] {
            // A move in that a listing read after the watch already showed (an inotify tree's new
            // directory, listed as things moved into it): the same inode is still there, so it is
            // a repeat, not a replacement. (One statx, for a move onto a name whose inode a
            // listing read: a tree's listing reads every entry's.)
            if event.has(InotifyMask.movedTo), directory.suppressesRepeats, !FanotifyMarks.isFanotify(event.wd),
                let listed = directory.listedInode(event.name), entryInode(Array(event.name), in: event.wd) == listed
            {
                return
            }
            guard directory.apply(event, at: wallNow) || !directory.suppressesRepeats else { return }
            if directory.lacksInodes && !directory.isDueForLearning { lacksInodes(event.wd, directory) }
        }
        for watch in table.watches(event.wd) where !watch.subscriber.loop.isEnded {
            if watch.subscriber.loop.pause != nil { watch.subscriber.loop.pause?.touched.insert(event.wd) }
            // A directory inside a tree: what happens to it itself, its parent reports. (Its
            // attributes changed: what it could not read, it may read now.)
            if event.name.isEmpty, let node = watch.node, !node.isRoot {
                if event.has(InotifyMask.attributes) { directoryAttributesChanged(node, for: watch.subscriber) }
                continue
            }
            if let change = ChangeTranslation.change(
                for: event, in: watch.directory, mask: watch.mask, entry: watch.entry)
            {
                collect(change, for: watch.subscriber)
            }
            if let node = watch.node {
                if !event.name.isEmpty {
                    treeEvent(event, at: node, for: watch.subscriber)
                } else if event.has(InotifyMask.attributes) {
                    directoryAttributesChanged(node, for: watch.subscriber)
                }
            }
        }
    }

    func handleMove(from: InotifyEvent, to: InotifyEvent) {
        // A move the listing already shows: the directories were watched before it and listed
        // after it (a tree's new directory, most often). Its old name was never known, its new
        // one is, and was reported with the listing: the event is a repeat, as a creation the
        // listing showed is.
        if let source = known[from.wd], !source.contains(from.name) {
            if let target = known[to.wd], target.suppressesRepeats, target.contains(to.name) { return }
            // Its old name was never known (it was moved in, or made, and moved on before its
            // directory was listed): to the watchers, it comes from nowhere, as a move in does.
            handle(to)
            return
        }
        // A directory that the target's listing, read after the move, shows already: a tree's
        // walk met it there, as the directory the tree knew, and reported it with what it holds,
        // and the events read since about what is in it carried its new path. Its arrival was
        // said; its departure alone is news. (Reported as a rename, it would put the consumer's
        // copy of the directory from its old path over what those events said.)
        let arrivalListed = to.has(InotifyMask.isDirectory) && isListed(to)
        if from.wd == to.wd {
            known[from.wd]?.renamed(
                from: from.name, to: to.name, isDirectory: to.has(InotifyMask.isDirectory), at: wallNow)
        } else {
            let moved = known[from.wd]?.takeOut(from.name) ?? nil
            known[to.wd]?.putIn(to.name, moved, isDirectory: to.has(InotifyMask.isDirectory), at: wallNow)
        }
        if !listings.pending.isEmpty {
            if from.wd == to.wd {
                listings.pending[from.wd]?.steps.append(
                    .renamed(from: from.name, to: to.name, isDirectory: to.has(InotifyMask.isDirectory)))
            } else {
                listings.pending[from.wd]?.steps.append(.movedOut(from.name))
                listings.pending[to.wd]?.steps.append(.movedIn(to.name, isDirectory: to.has(InotifyMask.isDirectory)))
            }
        }
        if let directory = known[to.wd], directory.lacksInodes && !directory.isDueForLearning {
            lacksInodes(to.wd, directory)
        }
        let sources = table.watches(from.wd)
        let targets = table.watches(to.wd)
        for watch in sources where watch.subscriber.loop.pause != nil {
            watch.subscriber.loop.pause?.touched.insert(from.wd)
        }
        for watch in targets where watch.subscriber.loop.pause != nil {
            watch.subscriber.loop.pause?.touched.insert(to.wd)
        }
        for source in sources where !source.subscriber.loop.isEnded {
            if let target = targets.first(where: { $0.subscriber === source.subscriber }) {
                // A file watch sees both ends when the move stays in its directory; it cares
                // when either end is its entry (renamed away, or replaced by a rename).
                guard source.covers(from.name) || target.covers(to.name),
                    source.mask & InotifyMask.movedFrom != 0 || target.mask & InotifyMask.movedTo != 0
                else { continue }
                if arrivalListed {
                    if let change = ChangeTranslation.change(
                        for: from, in: source.directory, mask: source.mask, entry: source.entry)
                    {
                        collect(change, for: source.subscriber)
                    }
                    continue
                }
                collect(
                    ChangeTranslation.rename(to: to, path: target.path(of: to.name), from: source.path(of: from.name)),
                    for: source.subscriber)
            } else if let change = ChangeTranslation.change(
                for: from, in: source.directory, mask: source.mask, entry: source.entry)
            {
                collect(change, for: source.subscriber)
            }
        }
        for target in targets where !target.subscriber.loop.isEnded && !arrivalListed {
            if sources.contains(where: { $0.subscriber === target.subscriber }) { continue }
            if var change = ChangeTranslation.change(
                for: to, in: target.directory, mask: target.mask, entry: target.entry)
            {
                // Another watcher of this process saw it leave, so its origin is known.
                change.oldPath = sources.first.map { $0.directory.appending(bytes: from.name) }
                collect(change, for: target.subscriber)
            }
        }
        if to.has(InotifyMask.isDirectory) {
            treeMoved(from: from, to: to, sources: sources, targets: targets, arrivalListed: arrivalListed)
        }
    }

    /// Whether the entry a move brought in is the one a listing read after it showed already:
    /// its inode, as that listing read it, is still at its name. (One statx, for a directory
    /// moved onto a name known with its inode.)
    private func isListed(_ arrival: InotifyEvent) -> Bool {
        guard let target = known[arrival.wd], target.suppressesRepeats, let inode = target.listedInode(arrival.name)
        else { return false }
        return entryInode(Array(arrival.name), in: arrival.wd) == inode
    }

    func collect(_ change: DirectoryChange, for subscription: Subscription) {
        if subscription.loop.pause != nil, !ChangeTranslation.endsWatch(change) {
            // Paused: resuming lists the directories instead. A notice that a listing will not
            // repeat (a watch that could not be added, a listing that failed) is kept for then.
            if change.kind == .overflow {
                subscription.loop.pause?.lostEvents = true
                if change.error != nil { subscription.loop.pause?.owed.append(change) }
            }
            return
        }
        if let exclusions = subscription.exclusions, exclusions.excludes(change, under: subscription.root) { return }
        if subscription.loop.settler != nil {
            settle(change, for: subscription)
        } else if subscription.collect(change) {
            outbox.dirty.append(subscription)
        }
        if ChangeTranslation.endsWatch(change) {
            subscription.loop.endsWithBatch = true
            end(subscription)
        }
    }

    // MARK: - Settling

    /// A settling watcher's change waits in its batch until the batch is due; one that ends the
    /// watch hands the batch over at once.
    private func settle(_ change: DirectoryChange, for subscription: Subscription) {
        if subscription.loop.settler!.add(change, now: now) { timed.settling.append(subscription) }
        if ChangeTranslation.endsWatch(change) { release(subscription, force: true) }
    }

    /// Hands over the settling watchers' batches that are due.
    private func releaseSettled() {
        var index = 0
        while index < timed.settling.count {
            let subscription = timed.settling[index]
            if let due = subscription.loop.settler?.deadline, now >= due {
                release(subscription, force: false)
            } else {
                index += 1
            }
        }
    }

    /// Hands a settling watcher's batch over (when due, or `force`d), then the barriers that
    /// waited for it.
    private func release(_ subscription: Subscription, force: Bool) {
        guard let batch = subscription.loop.settler?.take(now: now, force: force) else { return }
        timed.settling.removeAll { $0 === subscription }
        for change in batch where subscription.collect(change) { outbox.dirty.append(subscription) }
        complete(barriers.take(.settling(ObjectIdentifier(subscription))))
    }

    private func end(_ subscription: Subscription) {
        subscription.loop.isEnded = true
        if subscription.loop.polled != nil {
            subscription.loop.polled = nil
            timed.polled.removeAll { $0 === subscription }
        }
        for wd in subscription.loop.descriptors { release(wd, for: subscription) }
        subscription.loop.descriptors = []
        subscription.loop.tree = nil
        if subscription.loop.fanotifyID != nil { fanotifyEnded(subscription) }
        if subscription.loop.followsMounts { stopFollowingMounts(subscription) }
    }

    /// Takes `subscription` off the kernel watch `wd`.
    func release(_ wd: Int32, for subscription: Subscription) {
        table.remove(subscription, from: wd)
        // Kept while a watcher of the directory keeps snapshots (a notice-only watcher that
        // stays has no use for it).
        if !table.watches(wd).contains(where: { $0.subscriber.keepsSnapshot }) {
            known[wd] = nil
            listings.pending[wd] = nil
            learning.remove(wd)
        }
        if FanotifyMarks.isFanotify(wd) && table.watches(wd).isEmpty { fanotify.marks.forget(wd) }
    }

    /// A kernel queue overflowed: inotify's (every watcher of it), or fanotify's (its trees).
    func overflowed(fanotify: Bool = false) {
        if held.isHolding { releaseHeldMove() }
        // A polled watcher reads nothing of the kernel's queue: it lost nothing.
        for subscription in subscriptions.values
        where !subscription.loop.isEnded && subscription.pollingInterval == nil
            && (subscription.loop.fanotifyID != nil) == fanotify
        {
            collect(DirectoryChange(kind: .overflow, path: subscription.root, isDirectory: true), for: subscription)
        }
        listings.rescanOwed = true
        for wd in listings.pending.keys { listings.pending[wd]?.overflowed = true }
        barriers.overflowed()
    }

    /// Lists the given kept directories again (every one after a kernel overflow; a catching-up
    /// watcher's own otherwise) and reports what changed since the watchers were last told, each
    /// change marked as found by the rescan, to the watchers that keep snapshots (the others
    /// asked for the notice alone); a catching-up watcher is told from what it knew when its
    /// backlog overflowed. A directory that can no longer be listed is reported: a watcher's own
    /// directory as removed when its path names nothing (its own events were among those lost),
    /// else with a second notice that carries the error; a tree's directory gone from its path is
    /// listed again once the others have been, since its parent's listing may have moved it.
    ///
    /// `takingCatchUps`: the directories are every one of the catching-up watchers' whose
    /// catch-up is due (all of them after a kernel overflow), so those catch-ups are taken now,
    /// once each before any directory is listed: the notice and what did not fit first, then each
    /// directory reported from what the watcher knew of it (a tree's, one after another). A
    /// resume's listing of some directories leaves them owed.
    private func rescan(_ descriptors: some Sequence<Int32>, afterKernelOverflow: Bool, takingCatchUps: Bool = true) {
        let descriptors = Array(descriptors)
        if takingCatchUps {
            for wd in descriptors {
                for watch in table.watches(wd)
                where watch.subscriber.loop.catchUp?.isDue == true && !watch.subscriber.loop.isEnded {
                    listings.catchUpBaselines[ObjectIdentifier(watch.subscriber)] = takeCatchUp(watch.subscriber)
                }
            }
        }
        defer { listings.catchUpBaselines = [:] }
        var moved: [Int32] = []
        // Parents first: a parent's listing moves the nodes of the directories renamed, exchanged
        // or replaced in it, so that each directory is listed at the path it has now, not at one
        // that names another directory since.
        let ordered = descriptors.map { wd in (wd, table.watches(wd).first?.directory.bytes.count ?? 0) }
            .sorted { $0.1 < $1.1 }.map(\.0)
        for wd in ordered where !rescanDirectory(wd, afterKernelOverflow: afterKernelOverflow, firstPass: true) {
            moved.append(wd)
        }
        for wd in moved { _ = rescanDirectory(wd, afterKernelOverflow: afterKernelOverflow, firstPass: false) }
    }

    /// One directory of ``rescan(_:afterKernelOverflow:)``; false when it is to be listed again
    /// after the others (a tree's directory not found at its path on the first pass).
    private func rescanDirectory(_ wd: Int32, afterKernelOverflow: Bool, firstPass: Bool) -> Bool {
        let watches = table.watches(wd).filter { !$0.subscriber.loop.isEnded && $0.subscriber.keepsSnapshot }
        let catchingUp = watches.filter { listings.catchUpBaselines[ObjectIdentifier($0.subscriber)] != nil }
        let resuming = watches.filter { $0.subscriber.loop.pause?.isDue == true }
        // A watcher paused and not resuming is among them: what they are told, it drops. One
        // still owed a catch-up is told nothing here: what it knew is its catch-up's.
        let others = watches.filter {
            $0.subscriber.loop.catchUp == nil && listings.catchUpBaselines[ObjectIdentifier($0.subscriber)] == nil
                && $0.subscriber.loop.pause?.isDue != true
        }
        guard let first = watches.first else { return true }
        // Never listed (it was unreadable when watching started): the notice stands.
        guard let directory = known[wd] else { return true }
        let current: Snapshot
        do {
            current = try services.listDirectory(first.directory)
            expectListingEcho(wd)
        } catch {
            // Gone from its path, a directory below a tree's root was removed or moved while the
            // events were lost: its parent's listing says which (and moves its node), so it is
            // listed again after the others, at the path it has then, and a second time gone is
            // gone (the parent's listing, or the event that came after it, reports it). Only a
            // watcher's own directory gone ends that watcher.
            let gone = error.errno == ENOENT || error.errno == ENOTDIR
            let belowARoot = watches.filter { !($0.node?.isRoot ?? true) }
            if gone && !belowARoot.isEmpty && firstPass { return false }
            let told = afterKernelOverflow ? others + catchingUp : catchingUp
            rescanFailed(error, watches: gone ? told.filter { $0.node?.isRoot ?? true } : told)
            // A resuming watcher's own directory: its batch says the listing failed.
            for watch in resuming where watch.node?.isRoot ?? true { watch.subscriber.loop.pause?.failure = error }
            return true
        }
        var subdirectories: [[UInt8]: UInt64] = [:]
        if let node = first.node, !node.children.isEmpty {
            // Where the listing shows each directory's number, under its name or another.
            var byInode: [UInt64: [UInt8]] = [:]
            for (name, entry) in current.entries where entry.kind == .directory { byInode[entry.inode] = name }
            for (name, child) in node.children {
                let found = byInode[child.inode]
                subdirectories[name] = inode(
                    of: child, at: found.map { first.directory.appending(bytes: $0[...]) }, mask: first.mask)
            }
        }
        let differences = directory.differences(to: current, directories: subdirectories)
        for watch in others { report(differences, to: watch) }
        // A watcher whose backlog overflowed is told from what it knew then, once its backlog
        // has been delivered; until then its changes stay dropped.
        for watch in catchingUp {
            let baselines = listings.catchUpBaselines[ObjectIdentifier(watch.subscriber)] ?? [:]
            // A fanotify tree's directory not yet listed when the backlog overflowed: what the
            // watcher was told of it is unknown, and its entries are not news.
            if baselines[wd] == nil, watch.subscriber.loop.tree?.isLazy == true { continue }
            let baseline = baselines[wd] ?? NameTable()
            report(Snapshot.differences(from: baseline.dictionary(), to: current), to: watch)
        }
        for watch in resuming {
            let baseline = watch.subscriber.loop.pause?.baseline[wd] ?? NameTable()
            found(Snapshot.differences(from: baseline.dictionary(), to: current), by: watch)
        }
        directory.reset(to: current)
        return true
    }

    /// The inode of a tree's directory, for a rescan to tell whether the listing shows it (at
    /// `found`, the path of the listing's directory with its number, if any), or another one
    /// (`.max`, which matches no entry).
    ///
    /// An inotify watch holds its directory's inode while the directory is there, but one
    /// removed while the events were lost took its watch with it, and a directory made since may
    /// have been given its number: the kernel says whether the watch it gives the path found is
    /// the node's. A fanotify tree's directory made or moved in by an event has no inode read:
    /// its handle tells it.
    private func inode(of node: TreeNode, at found: FileSystemPath?, mask: UInt32) -> UInt64 {
        if !FanotifyMarks.isFanotify(node.wd) {
            guard node.inode != 0, let found,
                let wd = try? table.kernelWatch(found, mask: mask, flags: Self.treeWatchFlags)
            else { return node.inode }
            if wd == node.wd { return node.inode }
            // Another directory's: the walk that reports it watches it.
            if table.watches(wd).isEmpty { try? table.system.inotifyRemoveWatch(table.inotifyFD, wd) }
            return .max
        }
        guard node.inode == 0, let handle = fanotify.marks.handle(node.wd),
            let mountFD = fanotify.marks.mountFD(for: handle)
        else { return node.inode }
        let system = table.system
        guard let fd = try? system.open(handle, mountFD: mountFD) else { return .max }
        defer { system.close(fd) }
        guard let status = try? system.entryStatus(in: fd, name: [UInt8(ascii: ".")]) else { return .max }
        node.inode = status.inode
        return status.inode
    }

    /// Ends a watcher's wait for its catch-up: collects the changes that did not fit when its
    /// backlog overflowed, and returns what it knew of its directories then.
    ///
    /// The changes collected in this wake-up, before the listing, are dropped as those of the
    /// wake-ups before it were (``flushBatches()``): they happened after what the watcher knew,
    /// so the listing reports what they came to, and delivered too they would come twice.
    private func takeCatchUp(_ subscription: Subscription) -> [Int32: NameTable<KnownDirectory.Known>] {
        guard var catchUp = subscription.loop.catchUp else { return [:] }
        if !subscription.loop.pending.isEmpty {
            catchUp.dropped += subscription.loop.pending.count
            subscription.loop.pending = []
            // Collected again below: one flush, of the catch-up.
            outbox.dirty.removeAll { $0 === subscription }
        }
        subscription.loop.catchUp = nil
        subscription.loop.takesAnyBatch = true
        // The notice first: the watcher fell behind, this many changes were held back, and what
        // they came to follows.
        collect(
            DirectoryChange(
                kind: .overflow, path: subscription.root, isDirectory: true,
                droppedChanges: catchUp.remainder.count + catchUp.dropped),
            for: subscription)
        for change in catchUp.remainder { collect(change, for: subscription) }
        for request in barriers.take(.catchUp(ObjectIdentifier(subscription))) { barriers.wait(request, for: .rescan) }
        return catchUp.baseline
    }

    /// Reports the differences a rescan found to one watch, as far as it selected and covers them.
    /// In a tree, the directories the rescan found appeared are watched and their entries
    /// reported, and those gone are let go.
    private func report(_ differences: [Snapshot.Difference], to watch: WatchTable<Subscription>.Watch) {
        for difference in differences {
            if ChangeTranslation.selects(watch.mask, difference.kind),
                watch.covers(difference.name[...]) || (difference.oldName.map { watch.covers($0[...]) } ?? false)
            {
                collect(
                    DirectoryChange(
                        kind: difference.kind, path: watch.path(of: difference.name[...]),
                        oldPath: difference.oldName.map { watch.path(of: $0[...]) },
                        isDirectory: difference.isDirectory, foundByRescan: true),
                    for: watch.subscriber)
            }
            guard let node = watch.node, !watch.subscriber.loop.isEnded else { continue }
            if !difference.isDirectory {
                // A file renamed or made over a directory (an exchange's other half, the
                // directory removed since): that directory is let go.
                if difference.kind == .renamed || difference.kind == .created, node.child(difference.name[...]) != nil {
                    treeChanged(
                        difference.name[...], at: node, appeared: false, for: watch.subscriber, foundByRescan: true)
                }
                continue
            }
            switch difference.kind {
            case .removed:
                treeChanged(difference.name[...], at: node, appeared: false, for: watch.subscriber, foundByRescan: true)
            case .renamed:
                if let old = difference.oldName, let tree = watch.subscriber.loop.tree, let moved = node.child(old[...])
                {
                    // Renamed over a directory (an exchange's other half, moved on while the
                    // events were lost): that one is let go here, and found where it is now.
                    if let replaced = node.child(difference.name[...]), replaced !== moved {
                        treeChanged(
                            difference.name[...], at: node, appeared: false, for: watch.subscriber, foundByRescan: true)
                    }
                    move(moved, to: difference.name[...], in: node, of: tree, for: watch.subscriber)
                } else {
                    treeChanged(
                        difference.name[...], at: node, appeared: true, for: watch.subscriber, foundByRescan: true)
                }
            case .created:
                treeChanged(difference.name[...], at: node, appeared: true, for: watch.subscriber, foundByRescan: true)
            default:
                break
            }
        }
    }

    private func rescanFailed(_ error: SyscallError, watches: [WatchTable<Subscription>.Watch]) {
        for watch in watches where !watch.subscriber.loop.isEnded {
            collect(failureNotice(error, for: watch.subscriber), for: watch.subscriber)
        }
    }

    /// What a watcher is told when its directory could not be listed again: removed when its
    /// path names nothing, else a notice that carries the error.
    func failureNotice(_ error: SyscallError, for subscription: Subscription) -> DirectoryChange {
        let root = subscription.root
        if error.errno == ENOENT || error.errno == ENOTDIR {
            return DirectoryChange(kind: .rootRemoved, path: root, isDirectory: true, foundByRescan: true)
        }
        let failure = DirectoryWatcherError(error, path: root.description)
        return DirectoryChange(kind: .overflow, path: root, isDirectory: true, error: failure)
    }

    func lacksInodes(_ wd: Int32, _ directory: KnownDirectory) {
        learning.add(wd)
        directory.isDueForLearning = true
    }

    /// Lists the names of the directories with entries whose inode is not on record, and records
    /// those inodes, so that a rescan can follow such a file to a new name. A directory stays due
    /// while it has entries that may have been born in the birth clock's current tick. `now`: when
    /// the schedule called for it (nil when a test did).
    private func learnInodes(at now: UInt64?) {
        let start = services.birthClock()
        let began = services.wallClock()
        var due: Set<Int32> = []
        for wd in learning.due {
            guard let directory = known[wd] else { continue }
            directory.isDueForLearning = false
            guard directory.lacksInodes,
                let first = table.watches(wd).first(where: { !$0.subscriber.loop.isEnded })
            else { continue }
            let listNames = services.listNames
            do {
                try directory.learnInodes(listedAfter: start) { visit throws(SyscallError) in
                    try listNames(first.directory) { name, inode, _ in visit(name, inode) }
                }
                expectListingEcho(wd)
            } catch {
                continue  // gone or unreadable: its own events, or the next rescan, will say
            }
            if directory.lacksInodes {
                directory.isDueForLearning = true
                due.insert(wd)
            }
        }
        let end = services.wallClock()
        let took = (end.seconds - began.seconds) * 1_000_000_000 + Int64(end.nanoseconds) - Int64(began.nanoseconds)
        learning.listed(stillDue: due, took: UInt64(clamping: took), at: now)
    }

    /// Lists a watched directory, expecting the echo of its own reading.
    private func list(_ directory: FileSystemPath, wd: Int32) -> Snapshot? {
        guard let snapshot = try? services.listDirectory(directory) else { return nil }
        expectListingEcho(wd)
        return snapshot
    }

    /// The router is listing the directory of `wd`: its open, reads and close come back as events
    /// when a watcher of it asked for those (no entry kept otherwise, so that routing an event
    /// does not look this set up for ever after a tree of 100,000 directories was listed).
    func expectListingEcho(_ wd: Int32) {
        let echo = InotifyMask.open | InotifyMask.access | InotifyMask.closeNoWrite
        if let mask = table.kernelMask(wd), mask & echo != 0 { listings.echoes.insert(wd) }
    }

    /// The open, reads and close of a directory the router listed, which the kernel reports on
    /// the directory itself. The echo ends with its close, or with the first other event of the
    /// directory (when nobody asked for closes, none comes).
    private func isListingEcho(_ event: InotifyEvent) -> Bool {
        guard listings.echoes.contains(event.wd) else { return false }
        let echo = InotifyMask.open | InotifyMask.access | InotifyMask.closeNoWrite
        guard event.name.isEmpty, event.has(InotifyMask.isDirectory), event.mask & ~InotifyMask.isDirectory & ~echo == 0
        else {
            listings.echoes.remove(event.wd)
            return false
        }
        if event.has(InotifyMask.closeNoWrite) { listings.echoes.remove(event.wd) }
        return true
    }

    private func flushBatches() {
        if !outbox.unwatchedTrees.isEmpty { reportUnwatched() }
        for subscription in outbox.dirty {
            // Owed a catch-up: its changes until then are what the catch-up will report.
            if subscription.loop.catchUp != nil && !subscription.loop.endsWithBatch {
                subscription.loop.catchUp?.dropped += subscription.loop.pending.count
                subscription.loop.pending = []
                continue
            }
            let wasOverflowing = subscription.loop.isOverflowing
            schedule(subscription.flush())
            if !wasOverflowing, subscription.loop.catchUp != nil {
                // The backlog just overflowed: what the watcher has been told of its
                // directories is what they are known to be now, minus what did not fit.
                for wd in subscription.loop.descriptors {
                    if let directory = known[wd] { subscription.loop.catchUp?.baseline[wd] = directory.entries }
                }
            }
        }
        outbox.dirty.removeAll(keepingCapacity: true)
    }

    func schedule(_ mailbox: Mailbox?) {
        if let mailbox { outbox.ready.append(mailbox) }
    }

    // MARK: - Barriers

    private func barrierReached() {
        let (satisfied, writeAgain) = barriers.reached()
        complete(satisfied)
        if writeAgain { writeBarrier() }
    }

    /// Hands every pending batch to its queue first, so each completion runs after the changes
    /// that came before it.
    private func complete(_ requests: [BarrierRequest]) {
        guard !requests.isEmpty else { return }
        flushBatches()
        for request in requests {
            if request.subscription.loop.catchUp != nil && !request.subscription.loop.isEnded {
                barriers.wait(request, for: .catchUp(ObjectIdentifier(request.subscription)))
            } else if request.subscription.loop.pause?.isDue == true && !request.subscription.loop.isEnded {
                // Resuming: the barrier follows what changed while the watcher was paused.
                barriers.wait(request, for: .resume(ObjectIdentifier(request.subscription)))
            } else if request.subscription.loop.settler?.isEmpty == false && !request.subscription.loop.isEnded {
                // Changes from before the barrier wait to settle: the barrier follows them.
                barriers.wait(request, for: .settling(ObjectIdentifier(request.subscription)))
            } else {
                schedule(request.subscription.run(request.completion))
            }
        }
    }

    private func writeBarrier() {
        while true {
            do {
                try services.writeBarrierFile()
                return
            } catch {
                // Without the write no event will come: complete what was in flight now rather
                // than never, and try again for what was waiting.
                let (satisfied, writeAgain) = barriers.reached()
                complete(satisfied)
                if !writeAgain { return }
            }
        }
    }
}
