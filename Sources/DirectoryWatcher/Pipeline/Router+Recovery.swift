import Glibc

/// Recovery: after a kernel overflow, or a backlog's catch-up, the kept directories are listed
/// again and each watcher is told exactly what it missed.
extension Router {
    /// A watcher's overflowed backlog has been delivered: its catch-up is due once the kernel
    /// queue is drained.
    func backlogDrained(_ subscription: Subscription) {
        assert(services.isOnLoopThread())
        // (A save waits for the same: it may be due now.)
        takeDueSaves()
        guard subscription.loop.catchUp != nil, !subscription.loop.isEnded,
            subscriptions[ObjectIdentifier(subscription)] === subscription
        else { return }
        subscription.loop.catchUp?.isDue = true
        listings.catchUps.append(subscription)
    }

    /// A kernel queue overflowed: a watch backend's (every watcher of it), or a mark backend's
    /// (its trees, `marked`).
    func overflowed(marked: Bool = false) {
        if held.isHolding { releaseHeldMove() }
        // A polled watcher reads nothing of the kernel's queue: it lost nothing.
        for subscription in subscriptions.values
        where !subscription.loop.isEnded && subscription.pollingInterval == nil
            && (subscription.loop.markedFileSystem != nil) == marked
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
    /// else with a `failed` change that names it and carries the error; a tree's directory gone from its path is
    /// listed again once the others have been, since its parent's listing may have moved it.
    ///
    /// `takingCatchUps`: the directories are every one of the catching-up watchers' whose
    /// catch-up is due (all of them after a kernel overflow), so those catch-ups are taken now,
    /// once each before any directory is listed: the notice and what did not fit first, then each
    /// directory reported from what the watcher knew of it (a tree's, one after another). A
    /// resume's listing of some directories leaves them owed.
    func rescan(_ descriptors: some Sequence<Int32>, afterKernelOverflow: Bool, takingCatchUps: Bool = true) {
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
        // Each `.gitignore` read again, once every directory is known as it is now.
        var readers: [ObjectIdentifier: Subscription] = [:]
        for wd in ordered {
            for watch in table.watches(wd) where watch.subscriber.gitIgnores != nil {
                readers[ObjectIdentifier(watch.subscriber)] = watch.subscriber
            }
        }
        for subscription in readers.values { readGitIgnores(of: ordered, for: subscription) }
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
        // A watcher starting from a saved state lists its directory here, once, rather than
        // when it subscribed as well: what it knows of it is the state.
        let listedFirstHere =
            !known.contains(wd) && first.node == nil && watches.count == 1
            && resuming.contains { $0.subscriber.loop.pause?.standsForStop == true }
        if listedFirstHere, let watch = resuming.first, let visit = services.visitEntries {
            do throws(SyscallError) {
                try restoreListing(wd, for: watch, visit)
            } catch {
                if watch.node?.isRoot ?? true { watch.subscriber.loop.pause?.failure = error }
            }
            return true
        }
        guard let directory = known[wd] ?? (listedFirstHere ? KnownDirectory(Snapshot()) : nil) else { return true }
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
            for child in node.children {
                let found = byInode[child.inode]
                subdirectories[child.name] = inode(
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
            adoptSavedState(of: watch.subscriber)
            let baseline = watch.subscriber.loop.pause?.baseline[wd] ?? NameTable()
            let before = baseline.dictionary()
            found(Snapshot.differences(from: before, to: current), by: watch, before: before, after: current)
        }
        directory.reset(to: current)
        if listedFirstHere {
            known[wd] = directory
            if directory.lacksInodes { lacksInodes(wd, directory) }
        } else {
            // Found empty: shared again, as it was before the rescan gave it its own.
            known.share(wd, ifStill: directory)
        }
        return true
    }

    /// The listing of a watcher's own directory when it starts from a saved state: compared with
    /// the state as it is read, each entry looked up in the state's table by its name in the
    /// listing's buffer (first at the record after the last one found: a table saved from a
    /// listing is in the listing's order), so that only the entries that changed are copied out
    /// (for the renames among them, and the report). The state's table, updated in place, is then
    /// the kept directory. Until the state's decoding (on a worker) is done, the entries listed
    /// are kept aside, and compared once it is.
    private func restoreListing(
        _ wd: Int32, for watch: WatchTable<Subscription>.Watch,
        _ visit: (FileSystemPath, (ArraySlice<UInt8>, EntryStatus) -> Void) throws(SyscallError) -> Void
    ) throws(SyscallError) {
        let subscription = watch.subscriber
        var table = NameTable<KnownDirectory.Known>()
        var seen: [Bool] = []
        var isReady = false
        var cursor = 0
        var left: [[UInt8]: KnownDirectory.Known] = [:]
        var arrived: [[UInt8]: Snapshot.Entry] = [:]
        var newcomers: [([UInt8], EntryStatus)] = []
        var inPlace: [Snapshot.Difference] = []
        // Listed before the state was decoded: names end to end, with each one's end and status.
        var asideNames: [UInt8] = []
        var aside: [(end: Int, status: EntryStatus)] = []
        func compare(_ name: ArraySlice<UInt8>, _ status: EntryStatus) {
            guard let record = table.record(forName: name, expecting: cursor) else {
                newcomers.append((Array(name), status))
                arrived[Array(name)] = status
                return
            }
            cursor = record + 1
            seen[record] = true
            let before = table[record: record]
            table[record: record] = .entry(status)
            if before.isSameFile(as: status) {
                if let kind = before.change(to: status, renamed: false) {
                    inPlace.append(
                        Snapshot.Difference(
                            kind: kind, name: Array(name), oldName: nil, isDirectory: status.kind == .directory))
                }
                return
            }
            left[Array(name)] = before
            arrived[Array(name)] = status
        }
        func becomeReady(waiting: Bool) {
            guard let saved = takeSavedTable(wd, of: subscription, waiting: waiting) else { return }
            table = saved
            seen = [Bool](repeating: false, count: table.count)
            isReady = true
            var start = 0
            for (end, status) in aside {
                compare(asideNames[start..<end], status)
                start = end
            }
            asideNames = []
            aside = []
        }
        becomeReady(waiting: false)
        try visit(watch.directory) { name, status in
            if !isReady && aside.count & 63 == 0 { becomeReady(waiting: false) }
            guard isReady else {
                asideNames.append(contentsOf: name)
                aside.append((asideNames.count, status))
                return
            }
            compare(name, status)
        }
        expectListingEcho(wd)
        if !isReady { becomeReady(waiting: true) }
        var gone: [[UInt8]] = []
        var index = 0
        table.forEach { name, known in
            if !seen[index] {
                left[Array(name)] = known
                gone.append(Array(name))
            }
            index += 1
        }
        for name in gone { table.removeValue(forName: name[...]) }
        for (name, status) in newcomers { table.updateValue(.entry(status), forName: name[...]) }
        // What left and what arrived, paired into renames as a diff of two listings pairs them;
        // then what changed in place, by name.
        let after = Snapshot(entries: arrived)
        inPlace.sort { $0.name.lexicographicallyPrecedes($1.name) }
        found(Snapshot.differences(from: left, to: after) + inPlace, by: watch, before: left, after: after)
        known[wd] = KnownDirectory(entries: table)
    }

    /// The inode of a tree's directory, for a rescan to tell whether the listing shows it (at
    /// `found`, the path of the listing's directory with its number, if any), or another one
    /// (`.max`, which matches no entry).
    ///
    /// A watch holds its directory's inode while the directory is there, but one
    /// removed while the events were lost took its watch with it, and a directory made since may
    /// have been given its number: the backend says whether the watch it gives the path found is
    /// the node's. A fanotify tree's directory made or moved in by an event has no inode read:
    /// its handle tells it.
    private func inode(of node: TreeNode, at found: FileSystemPath?, mask: UInt32) -> UInt64 {
        if !MarkedDescriptors.contains(node.wd) {
            guard node.inode != 0, let found,
                let wd = try? table.backend.watch(found, events: mask | Self.treeBits, followingLinks: false)
            else { return node.inode }
            if wd == node.wd { return node.inode }
            // Another directory's: the walk that reports it watches it.
            if table.watches(wd).isEmpty { table.backend.unwatch(wd) }
            return .max
        }
        guard node.inode == 0, let handle = marked.backend.handle(node.wd),
            let mountFD = marked.backend.mountFD(for: handle)
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
        // A settling watcher's changes still settling came after what it knew
        // (``settlingOverflowed(_:)`` took those from before): dropped with the others. (Their
        // contents are not read: remembered, they would hide the listing's `modified` of the
        // same file.)
        if let settling = subscription.loop.settler?.take(now: now, force: true) {
            timed.settling.removeAll { $0 === subscription }
            catchUp.dropped += settling.count
        }
        subscription.loop.catchUp = nil
        subscription.loop.takesAnyBatch = true
        // The notice first: the watcher fell behind, this many changes were held back, and what
        // they came to follows. Handed over as they are: the remainder was settled already, and
        // settled again with what the listing finds it would be folded into changes it came
        // before.
        let notice = DirectoryChange(
            kind: .overflow, path: subscription.root, isDirectory: true,
            droppedChanges: catchUp.remainder.count + catchUp.dropped)
        if subscription.loop.settler == nil {
            collect(notice, for: subscription)
            for change in catchUp.remainder { collect(change, for: subscription) }
        } else {
            if subscription.collect(notice) { outbox.dirty.append(subscription) }
            for change in catchUp.remainder { _ = subscription.collect(change) }
        }
        // (A barrier waits for the catch-up while one is owed, not for what settles: none should
        // be left waiting for the changes dropped above, and one that is follows the listing.)
        for request in barriers.take(.catchUp(ObjectIdentifier(subscription)))
            + barriers.take(.settling(ObjectIdentifier(subscription)))
        {
            barriers.wait(request, for: .rescan)
        }
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
                        difference.name[...], at: node, appeared: true, for: watch.subscriber, foundByRescan: true,
                        told: true)
                }
            case .created:
                treeChanged(
                    difference.name[...], at: node, appeared: true, for: watch.subscriber, foundByRescan: true,
                    told: true)
            default:
                break
            }
        }
    }

    private func rescanFailed(_ error: SyscallError, watches: [WatchTable<Subscription>.Watch]) {
        for watch in watches where !watch.subscriber.loop.isEnded {
            collect(failureNotice(error, for: watch.subscriber, at: watch.directory), for: watch.subscriber)
        }
    }

    /// What a watcher is told when a directory of its (its own, or `directory` below it) could
    /// not be listed again: its own gone (its path names nothing) is its end; anything else is
    /// a ``DirectoryChange/Kind/failed`` change that names the directory and the cause.
    func failureNotice(
        _ error: SyscallError, for subscription: Subscription, at directory: FileSystemPath? = nil
    ) -> DirectoryChange {
        let root = subscription.root
        let path = directory ?? root
        if path == root && (error.errno == ENOENT || error.errno == ENOTDIR) {
            return DirectoryChange(kind: .rootRemoved, path: root, isDirectory: true, foundByRescan: true)
        }
        let failure = DirectoryWatcherError(error, path: path)
        return DirectoryChange(kind: .failed, path: path, isDirectory: true, error: failure)
    }
}
