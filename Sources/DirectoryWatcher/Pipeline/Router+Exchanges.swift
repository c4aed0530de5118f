/// Exchanges: `renameat2(RENAME_EXCHANGE)` swaps two names at once, and the kernel reports it as
/// two moves, mirror images (`a` to `b`, then `b` to `a`, each with its own cookie, or two
/// fanotify rename records). Applied in order as renames, the second would find `a` gone and the
/// first would have replaced `b`: a name lost. The same two moves are also what `mv a b; mv b a`
/// gives, with nothing to tell them apart in the events: an exchange leaves both names on disk,
/// the other leaves `a` alone. So a move over a name that is known waits for the next event (or
/// the pairing window, 10 ms, since the loop may read between the halves); when that is its
/// mirror image and both names are there, the pair is one ``DirectoryChange/Kind/exchanged``.
/// A watcher that keeps no names (``DirectoryWatcher/Recovery/notice``) sees two renames.
extension Router {
    /// An event out of the move pairing (or a fanotify rename with one end outside the trees).
    /// A move in with no first half may be an exchange with a place not watched (or watched too
    /// late to see it): the kernel then reports the entry that was there before leaving
    /// (`IN_MOVED_FROM` of the same name, the next cookie) just after. Applied in order, the two
    /// would take the new entry away; the departure is routed first.
    func route(_ event: InotifyEvent) {
        if let arrival = heldArrival {
            heldArrival = nil
            if isDeparture(event, before: arrival) {
                handle(event)
                handle(arrival)
                return
            }
            handle(arrival)
        }
        if event.has(InotifyMask.movedTo), event.cookie != 0, known[event.wd]?.contains(event.name) == true {
            if heldMove != nil { releaseHeldMove() }
            heldArrival = event
            heldDeadline = now &+ holdWindow
            return
        }
        handle(event)
    }

    private func isDeparture(_ event: InotifyEvent, before arrival: InotifyEvent) -> Bool {
        // The next cookie alone is also a move in and a rename away at once; an exchange leaves
        // the name there.
        event.wd == arrival.wd && event.cookie == arrival.cookie &+ 1 && event.name == arrival.name
            && event.has(InotifyMask.movedFrom) && entryExists(Array(event.name), in: event.wd)
    }

    /// A paired move: held when it may be an exchange's first half, else routed.
    func route(move from: InotifyEvent, to: InotifyEvent) {
        if let arrival = heldArrival {
            heldArrival = nil
            if isDeparture(from, before: arrival) {
                route(move: from, to: to)
                handle(arrival)
                return
            }
            handle(arrival)
        }
        if let held = heldMove {
            heldMove = nil
            if isMirror(held, of: (from, to)), isExchange(held) {
                handleExchange(held.from, held.to, secondIsDirectory: from.has(InotifyMask.isDirectory))
                return
            }
            handleMove(from: held.from, to: held.to)
        }
        // A fanotify tree's directory not listed yet has no names to tell whether the move
        // replaced one: the entries' handles tell an exchange by its mirror.
        if known[to.wd]?.contains(to.name) ?? (renamedObject != nil) {
            heldMove = (from, to)
            heldObject = renamedObject
            heldDeadline = now &+ holdWindow
        } else {
            handleMove(from: from, to: to)
        }
    }

    /// Routes the held move as the rename it is: its mirror did not come.
    func releaseHeldMove() {
        if let arrival = heldArrival {
            heldArrival = nil
            handle(arrival)
        }
        guard let held = heldMove else { return }
        heldMove = nil
        handleMove(from: held.from, to: held.to)
    }

    /// Whether the held move and its mirror, just routed, are an exchange rather than a rename
    /// and its way back (`mv a b; mv b a`), which give the kernel's same events. A fanotify
    /// rename names the entry it moved: an exchange moves two, the other one twice. Otherwise
    /// the disk tells: an exchange leaves an entry at the first move's target, two renames leave
    /// none; and when it has gone since (renamed or removed at once), the entry at the first
    /// move's source is the one the target held, which two renames would have left in place.
    /// (Before, both names had to be there still: an exchange followed at once by a rename of
    /// either name came as two renames, a name lost.)
    private func isExchange(_ held: (from: InotifyEvent, to: InotifyEvent)) -> Bool {
        if let first = heldObject, let second = renamedObject { return first != second }
        if entryExists(Array(held.to.name), in: held.to.wd) { return true }
        guard let inode = known[held.to.wd]?.inode(held.to.name) else { return false }
        return entryInode(Array(held.from.name), in: held.from.wd) == inode
    }

    private func isMirror(_ first: (from: InotifyEvent, to: InotifyEvent), of second: (InotifyEvent, InotifyEvent))
        -> Bool
    {
        let (from, to) = second
        return from.wd == first.to.wd && to.wd == first.from.wd && from.name == first.to.name
            && to.name == first.from.name && (first.from.wd != first.to.wd || first.from.name != first.to.name)
    }

    /// The entry at `from`'s name and the one at `to`'s exchanged names: the first (a directory
    /// when `from` says so) is now at `to`'s, the second (a directory when `secondIsDirectory`)
    /// at `from`'s.
    private func handleExchange(_ from: InotifyEvent, _ to: InotifyEvent, secondIsDirectory: Bool) {
        let firstIsDirectory = from.has(InotifyMask.isDirectory)
        let (sourceWD, targetWD) = (from.wd, to.wd)
        if sourceWD == targetWD {
            known[sourceWD]?.exchange(from.name, to.name)
            pendingListings[sourceWD]?.steps.append(.exchanged(from.name, to.name))
        } else {
            let first = known[sourceWD]?.takeOut(from.name) ?? nil
            let second = known[targetWD]?.takeOut(to.name) ?? nil
            known[sourceWD]?.putIn(from.name, second, isDirectory: secondIsDirectory, at: wallNow)
            known[targetWD]?.putIn(to.name, first, isDirectory: firstIsDirectory, at: wallNow)
            pendingListings[sourceWD]?.steps += [
                .movedOut(from.name), .movedIn(from.name, isDirectory: secondIsDirectory),
            ]
            pendingListings[targetWD]?.steps += [.movedOut(to.name), .movedIn(to.name, isDirectory: firstIsDirectory)]
        }
        for wd in Set([sourceWD, targetWD]) {
            if let directory = known[wd], directory.lacksInodes && !directory.isDueForLearning {
                lacksInodes(wd, directory)
            }
        }
        let sources = table.watches(sourceWD)
        let targets = sourceWD == targetWD ? sources : table.watches(targetWD)
        for watch in sources + targets where watch.subscriber.loop.pause != nil {
            watch.subscriber.loop.pause?.touched.formUnion([sourceWD, targetWD])
        }
        let moves = InotifyMask.movedFrom | InotifyMask.movedTo
        // Each end as the other half's events say it: what left and what came in its place.
        let secondFrom = InotifyEvent(
            wd: targetWD, mask: InotifyMask.movedFrom | (secondIsDirectory ? InotifyMask.isDirectory : 0),
            name: Array(to.name))
        let secondTo = InotifyEvent(
            wd: sourceWD, mask: InotifyMask.movedTo | (secondIsDirectory ? InotifyMask.isDirectory : 0),
            name: Array(from.name))
        for source in sources where !source.subscriber.loop.isEnded {
            if let target = targets.first(where: { $0.subscriber === source.subscriber }) {
                guard source.covers(from.name) || target.covers(to.name), (source.mask | target.mask) & moves != 0
                else { continue }
                collect(
                    DirectoryChange(
                        kind: .exchanged, path: target.path(of: to.name), oldPath: source.path(of: from.name),
                        isDirectory: firstIsDirectory),
                    for: source.subscriber)
            } else {
                // Only this end is watched: an entry left, another came in under its name.
                for event in [from, secondTo] {
                    if let change = ChangeTranslation.change(
                        for: event, in: source.directory, mask: source.mask, entry: source.entry)
                    {
                        collect(change, for: source.subscriber)
                    }
                }
            }
        }
        for target in targets where !target.subscriber.loop.isEnded {
            if sources.contains(where: { $0.subscriber === target.subscriber }) { continue }
            for event in [secondFrom, to] {
                if let change = ChangeTranslation.change(
                    for: event, in: target.directory, mask: target.mask, entry: target.entry)
                {
                    collect(change, for: target.subscriber)
                }
            }
        }
        if firstIsDirectory || secondIsDirectory {
            treeExchanged(
                from, to, firstIsDirectory: firstIsDirectory, secondIsDirectory: secondIsDirectory, sources: sources,
                targets: targets)
        }
    }

    /// An exchange as each recursive watcher sees it: the two directories' nodes trade places
    /// (their watches stay, and the paths below them follow); a tree that sees one end alone lets
    /// what left go and watches what came in.
    private func treeExchanged(
        _ from: InotifyEvent, _ to: InotifyEvent, firstIsDirectory: Bool, secondIsDirectory: Bool,
        sources: [WatchTable<Subscription>.Watch], targets: [WatchTable<Subscription>.Watch]
    ) {
        forEachTree(of: sources, targets) { subscription, tree, source, target in
            if let source, let target, tree.node(source.wd) === source, tree.node(target.wd) === target {
                let first = source.child(from.name)
                let second = target.child(to.name)
                if let first { move(first, to: to.name, in: target, of: tree, for: subscription) }
                if let second { move(second, to: from.name, in: source, of: tree, for: subscription) }
                // A directory of which the tree had no node (a fanotify tree's, not reached yet)
                // is watched under its new name.
                if first == nil, firstIsDirectory, !tree.isLazy {
                    treeChanged(to.name, at: target, appeared: true, for: subscription, foundByRescan: false)
                }
                if second == nil, secondIsDirectory, !tree.isLazy {
                    treeChanged(from.name, at: source, appeared: true, for: subscription, foundByRescan: false)
                }
            } else if let source {
                treeChanged(from.name, at: source, appeared: false, for: subscription, foundByRescan: false)
                if secondIsDirectory {
                    treeChanged(from.name, at: source, appeared: true, for: subscription, foundByRescan: false)
                }
            } else if let target {
                treeChanged(to.name, at: target, appeared: false, for: subscription, foundByRescan: false)
                if firstIsDirectory {
                    treeChanged(to.name, at: target, appeared: true, for: subscription, foundByRescan: false)
                }
            }
        }
    }
}
