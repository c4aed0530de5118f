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
/// ``MountFollowing``, ``MarkedTrees``). Every method runs on the loop's leading thread
/// (see Leadership), which ``RouterServices/isOnLoopThread`` checks in debug builds.
final class Router {
    /// A barrier waiting for its event, and where its completion runs.
    struct BarrierRequest {
        let subscription: Subscription
        let completion: @Sendable () -> Void
    }

    /// Marks an event read that cannot be trusted (a read error, a truncated record): reported as
    /// possible loss, as an overflow is.
    static let lossMarker = BackendEvent(wd: -1, mask: EventMask.queueOverflow)

    // Every property below is touched by the loop's leader alone (the router checks it is on
    // that thread), so the runtime's exclusivity checks would only cost time: four of them per
    // event routed (Docs/benchmarks.md, "Where the time goes").

    /// The system calls, clocks and hooks the loop gives the router.
    @exclusivity(unchecked) var services: RouterServices
    @exclusivity(unchecked) var table: WatchTable<Subscription>
    @exclusivity(unchecked) var subscriptions: [ObjectIdentifier: Subscription] = [:]
    @exclusivity(unchecked) private(set) var pairing: MovePairing
    /// Every barrier not completed yet, with what each waits for.
    @exclusivity(unchecked) var barriers = BarrierBook<BarrierRequest>()
    /// What this wake-up hands over: batches, mailboxes to drain, watch-limit notices.
    @exclusivity(unchecked) var outbox = Outbox()
    /// What the watchers have been told of each kernel-watched directory whose watchers keep
    /// snapshots (``Subscription/keepsSnapshot``), by watch descriptor.
    @exclusivity(unchecked) var known = KnownDirectories()
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
    @exclusivity(unchecked) var learning = InodeLearning()
    /// The mount table while trees follow it (``Router+Mounts``).
    @exclusivity(unchecked) var mountFollowing = MountFollowing()
    /// The trees watched through a backend that marks whole file systems (``Router+MarkedTrees``).
    @exclusivity(unchecked) var marked: MarkedTrees
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
        },
        marks: any FileSystemMarkBackend = UnavailableMarks()
    ) {
        self.services = RouterServices(
            listDirectory: listDirectory, listNames: listNames, isUnchanged: isUnchanged, wallClock: wallClock,
            birthClock: birthClock, clock: clock, barrierWD: barrierWD, writeBarrierFile: writeBarrierFile,
            inotifyUnavailable: inotifyUnavailable, isOnLoopThread: isOnLoopThread, wakeForCatchUp: wakeForCatchUp)
        self.table = table
        self.marked = MarkedTrees(backend: marks)
        self.pairing = MovePairing(window: pairingWindow)
    }

    /// When the loop must call ``expire(now:)``: a rename's first half stops waiting for its
    /// second, a settling watcher's batch is due, or directories are due to have their inodes
    /// learnt.
    var deadline: UInt64? {
        var earliest = pairing.deadline
        if held.isHolding { earliest = min(earliest ?? .max, held.deadline) }
        if let due = learning.deadline { earliest = min(earliest ?? .max, due) }
        // (Each loop only when it has something to go through: iterating an array property is a
        // retain and a release of its storage, and this runs at every wake-up.)
        if !timed.settling.isEmpty {
            for subscription in timed.settling {
                if let due = subscription.loop.settler?.deadline { earliest = min(earliest ?? .max, due) }
            }
        }
        if !timed.polled.isEmpty {
            for subscription in timed.polled where subscription.loop.pause == nil {
                if let due = subscription.loop.polled?.schedule.due { earliest = min(earliest ?? .max, due) }
            }
        }
        // Directories of a fanotify tree still to list: at once, after the events read.
        if !marked.snapshotQueue.isEmpty { earliest = 0 }
        return earliest
    }

    /// The mailboxes scheduled since the last call, for the loop to drain in this order.
    func takeReady() -> [Mailbox] {
        var taken: [Mailbox] = []
        takeReady(into: &taken)
        return taken
    }

    /// ``takeReady()`` appended to the loop's own list: no array is made for each wake-up (one
    /// returned would share its storage with the router's, which then copied it to empty it).
    func takeReady(into ready: inout [Mailbox]) {
        assert(services.isOnLoopThread())
        guard !outbox.ready.isEmpty else { return }
        // The common case, an empty list, takes the router's storage and gives it its own.
        guard ready.isEmpty else {
            ready.append(contentsOf: outbox.ready)
            outbox.ready.removeAllKeepingCapacity()
            return
        }
        swap(&ready, &outbox.ready)
    }

    // MARK: - From the loop

    /// One event read from the kernel, at `now`.
    func receive(_ event: BackendEvent, now: UInt64) {
        assert(services.isOnLoopThread())
        beginRead(now: now)
        // Most events pass straight through: nothing is held back and this is no rename's first
        // half (a second half finds no partner while nothing is held).
        if pairing.isEmpty && !held.isHolding
            && !(event.has(EventMask.movedFrom | EventMask.movedTo) && event.cookie != 0)
        {
            handle(event)
        } else {
            pairing.push(event, now: now) { handle($0) }
        }
    }

    /// The events of one read, at `now`, in order. Each event's first memory (the index slot of
    /// its name in its kept directory's table, ``NameTable/prefetch(_:)``) is asked for a few
    /// events ahead of the one routed: in a burst the table is larger than the caches, and the
    /// misses then overlap with routing instead of following one another.
    func receive(_ events: [BackendEvent], now: UInt64) {
        // A read's events are mostly in one directory: it is looked up once. (A stale one, for
        // an event routed meanwhile that dropped it, costs only a useless hint.)
        var last: (wd: Int32, directory: KnownDirectory?) = (-1, nil)
        func prefetch(_ event: BackendEvent) {
            guard !event.name.isEmpty else { return }
            if event.wd != last.wd { last = (event.wd, known[event.wd]) }
            last.directory?.prefetch(event.name)
        }
        // The first event is routed at once: asking for its memory first would gain nothing.
        for index in 1..<max(1, min(Self.prefetchDistance, events.count)) { prefetch(events[index]) }
        for index in events.indices {
            if index + Self.prefetchDistance < events.count { prefetch(events[index + Self.prefetchDistance]) }
            receive(events[index], now: now)
        }
    }

    /// How many events ahead of the one routed ``receive(_:now:)`` asks for their memory: enough
    /// to cover a cache miss with routing, few enough that what is fetched is still cached.
    static let prefetchDistance = 8

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
        if !marked.snapshotQueue.isEmpty { continueSnapshots() }
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
            rescan(known.descriptors, afterKernelOverflow: true)
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
        marked.snapshotQueue = []
        marked.trees = []
        marked.closeAll()
        mountFollowing.trees = []
        mountFollowing.table = nil  // (the loop closes the poll's descriptor with its others)
    }

    // MARK: - Events (never touch `pairing` here: it is mid-push)

    func handle(_ item: MovePairing.Item) {
        switch item {
        case .event(let event): route(event)
        case .move(let from, let to): route(move: from, to: to)
        }
    }

    func handle(_ event: BackendEvent) {
        // The next event came: a move held for its mirror image has none. (Unless it is the
        // moved directory's own event, which the kernel queues between an exchange's halves.)
        if held.isHolding, !(event.name.isEmpty && event.has(EventMask.moveSelf)) {
            releaseHeldMove()
        }
        if event.wd == -1 {
            if event.isOverflow { overflowed() }
            return
        }
        if event.wd == services.barrierWD {
            if event.has(EventMask.attributes) { barrierReached() }
            return
        }
        if event.has(EventMask.ignored) {
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
            if event.has(EventMask.movedTo), directory.suppressesRepeats, !MarkedDescriptors.contains(event.wd),
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
                if event.has(EventMask.attributes) { directoryAttributesChanged(node, for: watch.subscriber) }
                continue
            }
            if let change = ChangeTranslation.change(
                for: event, in: watch.directory, mask: watch.mask, entry: watch.entry)
            {
                collect(change, for: watch.subscriber)
            }
            if let node = watch.node {
                if !event.name.isEmpty {
                    if Self.treeEventMatters(event, at: node, followsLinks: watch.subscriber.followsLinks) {
                        treeEvent(event, at: node, for: watch.subscriber)
                    }
                } else if event.has(EventMask.attributes) {
                    directoryAttributesChanged(node, for: watch.subscriber)
                }
            }
            if watch.subscriber.gitIgnores != nil, event.name.elementsEqual(Self.gitIgnoreName) {
                gitIgnoreMayHaveChanged(
                    in: watch.node?.path ?? watch.directory, wd: event.wd, node: watch.node, for: watch.subscriber)
            }
        }
    }

    func handleMove(from: BackendEvent, to: BackendEvent) {
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
        let arrivalListed = to.has(EventMask.isDirectory) && (isListed(to) || isMetEarly(from, to))
        if from.wd == to.wd {
            known[from.wd]?.renamed(
                from: from.name, to: to.name, isDirectory: to.has(EventMask.isDirectory), at: wallNow)
        } else {
            let moved = known[from.wd]?.takeOut(from.name) ?? nil
            known[to.wd]?.putIn(to.name, moved, isDirectory: to.has(EventMask.isDirectory), at: wallNow)
        }
        if !listings.pending.isEmpty {
            if from.wd == to.wd {
                listings.pending[from.wd]?.steps.append(
                    .renamed(from: from.name, to: to.name, isDirectory: to.has(EventMask.isDirectory)))
            } else {
                listings.pending[from.wd]?.steps.append(.movedOut(from.name))
                listings.pending[to.wd]?.steps.append(.movedIn(to.name, isDirectory: to.has(EventMask.isDirectory)))
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
                    source.mask & EventMask.movedFrom != 0 || target.mask & EventMask.movedTo != 0
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
        if to.has(EventMask.isDirectory) {
            treeMoved(from: from, to: to, sources: sources, targets: targets, arrivalListed: arrivalListed)
        }
        gitIgnoresMoved([(from, sources), (to, targets)])
    }

    /// Whether the entry a move brought in is the one a listing read after it showed already:
    /// its inode, as that listing read it, is still at its name. (One statx, for a directory
    /// moved onto a name known with its inode.)
    private func isListed(_ arrival: BackendEvent) -> Bool {
        guard let target = known[arrival.wd], target.suppressesRepeats, let inode = target.listedInode(arrival.name)
        else { return false }
        return entryInode(Array(arrival.name), in: arrival.wd) == inode
    }

    /// Whether an inotify tree's walk met the directory this move brings at its new name before
    /// the event, by its watch (``TreeNode/metEarlyIn``), and reported it there with what it
    /// holds: its arrival was said, though the disk cannot confirm it when an ancestor of the
    /// target was renamed since (the path leads nowhere).
    private func isMetEarly(_ from: BackendEvent, _ to: BackendEvent) -> Bool {
        table.watches(to.wd).contains { watch in
            guard let target = watch.node, let tree = watch.subscriber.loop.tree, !tree.isLazy,
                let met = target.child(to.name), met.metEarlyIn == from.wd
            else { return false }
            return tree.metEarlyNames[met.wd]?[...] == from.name
        }
    }

    /// `ignoresAside`: a change git's rules are not to filter (what a `.gitignore` that changed
    /// lets in or leaves out).
    func collect(_ change: consuming DirectoryChange, for subscription: Subscription, ignoresAside: Bool = false) {
        // Taken, not copied: a change is built for one watcher and ends in its batch.
        if subscription.loop.pause != nil, !ChangeTranslation.endsWatch(change) {
            // Paused: resuming lists the directories instead. A notice that a listing will not
            // repeat (a watch that could not be added, a listing that failed) is kept for then.
            if change.kind == .overflow { subscription.loop.pause?.lostEvents = true }
            if change.kind == .failed { subscription.loop.pause?.owed.append(change) }
            return
        }
        if let exclusions = subscription.exclusions, exclusions.excludes(change, under: subscription.root) { return }
        if subscription.gitIgnores != nil, !ignoresAside {
            guard let kept = gitFiltered(change, for: subscription) else { return }
            change = kept
        }
        let ends = ChangeTranslation.endsWatch(change)
        if subscription.loop.settler != nil {
            settle(change, for: subscription)
        } else if subscription.collect(change) {
            outbox.dirty.append(subscription)
        }
        if ends {
            subscription.loop.endsWithBatch = true
            end(subscription)
        }
    }
}
