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
    func route(_ event: BackendEvent) {
        if let arrival = held.arrival {
            // The moved directory's own event, which the kernel queues between the halves.
            if event.name.isEmpty && event.has(EventMask.moveSelf) {
                handle(event)
                return
            }
            held.arrival = nil
            if isDeparture(event, before: arrival) {
                handle(event)
                handle(arrival)
                return
            }
            handle(arrival)
        }
        if event.has(EventMask.movedTo), event.cookie != 0, known[event.wd]?.contains(event.name) == true {
            if held.move != nil { releaseHeldMove() }
            held.arrival = event
            held.deadline = now &+ pairing.window
            return
        }
        handle(event)
    }

    func isDeparture(_ event: BackendEvent, before arrival: BackendEvent) -> Bool {
        guard
            event.wd == arrival.wd && event.cookie == arrival.cookie &+ 1 && event.name == arrival.name
                && event.has(EventMask.movedFrom)
        else { return false }
        // An entry of the other type leaving as one comes in: only an exchange does that (the
        // directory may be renamed since, so that its path no longer tells).
        if event.has(EventMask.isDirectory) != arrival.has(EventMask.isDirectory) { return true }
        // The next cookie alone is also a move in and a rename away at once; an exchange leaves
        // the name there.
        return entryExists(Array(event.name), in: event.wd)
    }

    /// A paired move: held when it may be an exchange's first half, else routed.
    func route(move from: BackendEvent, to: BackendEvent) {
        if let arrival = held.arrival {
            held.arrival = nil
            if isDeparture(from, before: arrival) {
                route(move: from, to: to)
                handle(arrival)
                return
            }
            handle(arrival)
        }
        if let move = held.move {
            held.move = nil
            if isMirror(move, of: (from, to)), isExchange(move, mirror: from) {
                handleExchange(move.from, move.to, secondIsDirectory: from.has(EventMask.isDirectory))
                return
            }
            handleMove(from: move.from, to: move.to)
        }
        // A fanotify tree's directory not listed yet has no names to tell whether the move
        // replaced one: the entries' handles tell an exchange by its mirror.
        if known[to.wd]?.contains(to.name) ?? (marked.renamedObject != nil) {
            held.move = (from, to)
            held.object = marked.renamedObject
            held.deadline = now &+ pairing.window
        } else {
            handleMove(from: from, to: to)
        }
    }

    /// Routes the held move as the rename it is: its mirror did not come.
    func releaseHeldMove() {
        if let arrival = held.arrival {
            held.arrival = nil
            handle(arrival)
        }
        guard let move = held.move else { return }
        held.move = nil
        handleMove(from: move.from, to: move.to)
    }

    /// Whether the held move and its mirror, just routed, are an exchange rather than a rename
    /// and its way back (`mv a b; mv b a`), which give the kernel's same events. A fanotify
    /// rename names the entry it moved: an exchange moves two, the other one twice. Otherwise
    /// the disk tells: an exchange leaves an entry at the first move's target, two renames leave
    /// none; and when it has gone since (renamed or removed at once), the entry at the first
    /// move's source is the one the target held, which two renames would have left in place.
    /// (Before, both names had to be there still: an exchange followed at once by a rename of
    /// either name came as two renames, a name lost.)
    ///
    /// The disk is asked through the paths the watcher knows, which a later rename of either
    /// directory (its event not read yet) makes stale. A directory's own inode tells: a path that
    /// leads elsewhere says nothing, and then the kernel's events decide. A file and a directory
    /// can only have been exchanged (a rename cannot put one over the other); two directories
    /// were exchanged when the first one's name holds another directory now (two renames would
    /// have put it back), or when the target's old directory is still watched (a rename over it
    /// would have dropped its watch, `IN_IGNORED`, before its way back); two files, when the cookies
    /// are consecutive, as an exchange's two halves always are (two renames' are when nothing
    /// else moved between them).
    private func isExchange(_ held: (from: BackendEvent, to: BackendEvent), mirror: BackendEvent) -> Bool {
        if let first = self.held.object, let second = marked.renamedObject { return first != second }
        let heldIsDirectory = held.from.has(EventMask.isDirectory)
        if heldIsDirectory != mirror.has(EventMask.isDirectory) { return true }
        if let atTarget = entry(Array(held.to.name), inDirectoryOf: held.to.wd) {
            if atTarget != nil { return true }
            if let inode = known[held.to.wd]?.inode(held.to.name) {
                if let atSource = entry(Array(held.from.name), inDirectoryOf: held.from.wd) {
                    return atSource == inode
                }
            } else if !heldIsDirectory {
                return false
            }
            // A directory known by its name alone (one an event brought): its watch tells.
        }
        if heldIsDirectory {
            // The directory that moved first is back at its name after two renames; after an
            // exchange, the other one is there (the target's may have had no watch to tell).
            if let moved = table.watches(held.from.wd).lazy.compactMap({ $0.node?.child(held.from.name) }).first,
                moved.inode != 0, let atSource = entry(Array(held.from.name), inDirectoryOf: held.from.wd),
                let inode = atSource
            {
                return inode != moved.inode
            }
            return table.watches(held.to.wd).contains { $0.node?.child(held.to.name) != nil }
        }
        return mirror.cookie == held.from.cookie &+ 1
    }

    /// Whether the listings read after an exchange show it already: each name holds, as they
    /// read it (a listed inode, or the inode of a tree's directory walked there), the entry it
    /// holds on disk now, and the two differ.
    private func isListed(exchangeOf from: BackendEvent, _ to: BackendEvent) -> Bool {
        func known(_ name: ArraySlice<UInt8>, in wd: Int32) -> UInt64? {
            if let inode = self.known[wd]?.listedInode(name) { return inode }
            let inode = table.watches(wd).lazy.compactMap { $0.node?.child(name)?.inode }.first ?? 0
            return inode == 0 ? nil : inode
        }
        guard let first = known(from.name, in: from.wd), let second = known(to.name, in: to.wd), first != second,
            let atFrom = entry(Array(from.name), inDirectoryOf: from.wd), atFrom == first,
            let atTo = entry(Array(to.name), inDirectoryOf: to.wd), atTo == second
        else { return false }
        return true
    }

    /// Which half of an exchange a listing read after it showed already, by the inodes the
    /// listings read: a directory listed after the exchange (walked as it moved in, most often)
    /// shows the entry the exchange put there, so both names are known by one inode; the disk
    /// says which of them holds it. nil when neither tells (two names of one file as well).
    private func listedHalf(of from: BackendEvent, _ to: BackendEvent) -> Half? {
        guard let first = known[from.wd]?.listedInode(from.name), let second = known[to.wd]?.listedInode(to.name),
            first == second
        else { return nil }
        if let atFrom = entry(Array(from.name), inDirectoryOf: from.wd), atFrom == first { return .second }
        if let atTo = entry(Array(to.name), inDirectoryOf: to.wd), atTo == second { return .first }
        return nil
    }

    /// The inode of the entry `name` in the directory of `wd` (`.some(nil)` when there is no such
    /// entry), looked up at the path the watcher knows; nil when that path no longer leads to the
    /// directory (renamed since: a tree knows its directories' inodes) or it cannot be opened.
    private func entry(_ name: [UInt8], inDirectoryOf wd: Int32) -> UInt64?? {
        guard let watch = table.watches(wd).first else { return nil }
        let system = table.system
        guard let fd = try? system.openDirectoryReference(watch.directory, followingLinks: false) else { return nil }
        defer { system.close(fd) }
        do throws(SyscallError) {
            if let expected = watch.node?.inode, expected != 0 {
                guard try system.entryStatus(in: fd, name: [UInt8(ascii: ".")])?.inode == expected else { return nil }
            }
            return .some(try system.entryStatus(in: fd, name: name)?.inode)
        } catch {
            return nil
        }
    }

    private func isMirror(_ first: (from: BackendEvent, to: BackendEvent), of second: (BackendEvent, BackendEvent))
        -> Bool
    {
        let (from, to) = second
        return from.wd == first.to.wd && to.wd == first.from.wd && from.name == first.to.name
            && to.name == first.from.name && (first.from.wd != first.to.wd || first.from.name != first.to.name)
    }

    /// The entry at `from`'s name and the one at `to`'s exchanged names: the first (a directory
    /// when `from` says so) is now at `to`'s, the second (a directory when `secondIsDirectory`)
    /// at `from`'s.
    private func handleExchange(_ from: BackendEvent, _ to: BackendEvent, secondIsDirectory: Bool) {
        // Listed after it (the walks of two directories just moved in, most often): both names
        // were reported holding what they hold since, and the exchange is a repeat.
        if isListed(exchangeOf: from, to) { return }
        let listed = listedHalf(of: from, to)
        let firstIsDirectory = from.has(EventMask.isDirectory)
        let (sourceWD, targetWD) = (from.wd, to.wd)
        if let listed {
            // The name listed after the exchange is known as it is; the other one holds an entry
            // not listed there yet.
            let (wd, name, isDirectory) =
                listed == .second ? (targetWD, to.name, firstIsDirectory) : (sourceWD, from.name, secondIsDirectory)
            _ = known[wd]?.takeOut(name)
            known[wd]?.putIn(name, nil, isDirectory: isDirectory, at: wallNow)
            listings.pending[wd]?.steps += [.movedOut(name), .movedIn(name, isDirectory: isDirectory)]
        } else if sourceWD == targetWD {
            known[sourceWD]?.exchange(from.name, to.name)
            listings.pending[sourceWD]?.steps.append(.exchanged(from.name, to.name))
        } else {
            let first = known[sourceWD]?.takeOut(from.name) ?? nil
            let second = known[targetWD]?.takeOut(to.name) ?? nil
            known[sourceWD]?.putIn(from.name, second, isDirectory: secondIsDirectory, at: wallNow)
            known[targetWD]?.putIn(to.name, first, isDirectory: firstIsDirectory, at: wallNow)
            listings.pending[sourceWD]?.steps += [
                .movedOut(from.name), .movedIn(from.name, isDirectory: secondIsDirectory),
            ]
            listings.pending[targetWD]?.steps += [.movedOut(to.name), .movedIn(to.name, isDirectory: firstIsDirectory)]
        }
        for wd in Set([sourceWD, targetWD]) {
            if let directory = known[wd], directory.lacksInodes && !directory.isDueForLearning {
                lacksInodes(wd, directory)
            }
        }
        let sources = table.watches(sourceWD)
        let targets = sourceWD == targetWD ? sources : table.watches(targetWD)
        for watch in [sources, targets].joined() where watch.subscriber.loop.pause != nil {
            watch.subscriber.loop.pause?.touched.formUnion([sourceWD, targetWD])
        }
        let moves = EventMask.movedFrom | EventMask.movedTo
        // Each end as the other half's events say it: what left and what came in its place.
        let secondFrom = BackendEvent(
            wd: targetWD, mask: EventMask.movedFrom | (secondIsDirectory ? EventMask.isDirectory : 0),
            name: Array(to.name))
        let secondTo = BackendEvent(
            wd: sourceWD, mask: EventMask.movedTo | (secondIsDirectory ? EventMask.isDirectory : 0),
            name: Array(from.name))
        for source in sources where !source.subscriber.loop.isEnded {
            if let target = targets.first(where: { $0.subscriber === source.subscriber }) {
                guard source.covers(from.name) || target.covers(to.name), (source.mask | target.mask) & moves != 0
                else { continue }
                // A tree's walk showed one half already: the other end is what changed since.
                switch arrivalSaid(source.node, target.node, from, to) ?? listed {
                case .second?:
                    collect([secondFrom, to], as: target)
                    continue
                case .first?:
                    collect([from, secondTo], as: source)
                    continue
                case nil:
                    break
                }
                let (new, old) = (target.path(of: to.name), source.path(of: from.name))
                if let ends = gitIgnoreEnds(
                    old: old, new: new, firstIsDirectory: firstIsDirectory, secondIsDirectory: secondIsDirectory,
                    for: source.subscriber)
                {
                    // Across git's line: what was seen leaves, what is seen now comes in.
                    var changes: [DirectoryChange] = []
                    if ends.newBefore {
                        changes.append(DirectoryChange(kind: .movedOut, path: new, isDirectory: secondIsDirectory))
                    }
                    if ends.oldBefore {
                        changes.append(DirectoryChange(kind: .movedOut, path: old, isDirectory: firstIsDirectory))
                    }
                    if ends.newAfter {
                        changes.append(DirectoryChange(kind: .movedIn, path: new, isDirectory: firstIsDirectory))
                    }
                    if ends.oldAfter {
                        changes.append(DirectoryChange(kind: .movedIn, path: old, isDirectory: secondIsDirectory))
                    }
                    for change in changes { collect(change, for: source.subscriber, ignoresAside: true) }
                    continue
                }
                collect(
                    DirectoryChange(kind: .exchanged, path: new, oldPath: old, isDirectory: firstIsDirectory),
                    for: source.subscriber)
            } else {
                // Only this end is watched: an entry left, another came in under its name.
                collect([from, secondTo], as: source)
            }
        }
        for target in targets where !target.subscriber.loop.isEnded {
            if sources.contains(where: { $0.subscriber === target.subscriber }) { continue }
            collect([secondFrom, to], as: target)
        }
        if firstIsDirectory || secondIsDirectory {
            treeExchanged(
                from, to, firstIsDirectory: firstIsDirectory, secondIsDirectory: secondIsDirectory, listed: listed,
                sources: sources, targets: targets)
        }
        gitIgnoresMoved([(from, sources), (to, targets)])
    }

    /// Collects what `events` say to `watch`'s watcher, as its selection and entry translate them.
    private func collect(_ events: [BackendEvent], as watch: WatchTable<Subscription>.Watch) {
        for event in events {
            if let change = ChangeTranslation.change(
                for: event, in: watch.directory, mask: watch.mask, entry: watch.entry)
            {
                collect(change, for: watch.subscriber)
            }
        }
    }

    /// An exchange as each recursive watcher sees it: the two directories' nodes trade places
    /// (their watches stay, and the paths below them follow); a tree that sees one end alone lets
    /// what left go and watches what came in.
    private func treeExchanged(
        _ from: BackendEvent, _ to: BackendEvent, firstIsDirectory: Bool, secondIsDirectory: Bool, listed: Half?,
        sources: WatchTable<Subscription>.Watches, targets: WatchTable<Subscription>.Watches
    ) {
        forEachTree(of: sources, targets) { subscription, tree, source, target in
            if let source, let target, let said = arrivalSaid(source, target, from, to) ?? listed {
                // The directory a walk met early is where the exchange put it; what is at the
                // other end now is the other entry, new there.
                let (met, end, name, isDirectory) =
                    said == .second
                    ? (source.child(from.name), target, to.name, firstIsDirectory)
                    : (target.child(to.name), source, from.name, secondIsDirectory)
                met?.metEarlyIn = -1
                treeChanged(name, at: end, appeared: false, for: subscription, foundByRescan: false)
                if isDirectory { treeChanged(name, at: end, appeared: true, for: subscription, foundByRescan: false) }
            } else if let source, let target, tree.node(source.wd) === source, tree.node(target.wd) === target {
                let first = source.child(from.name)
                let second = target.child(to.name)
                // A directory a walk could not open at its name (it met the other entry there) is
                // walked at the name the exchange gave it, as it would have been at its own;
                // taken first, so that no move tries it again at the old name.
                let firstUnreached = first == nil ? tree.takeUnreached(from.name, of: source) : nil
                let secondUnreached = second == nil ? tree.takeUnreached(to.name, of: target) : nil
                // Both moved before git's rules are asked of either: between the two moves, both
                // directories are at one path.
                let before = subscription.gitIgnores != nil ? gitRules(for: subscription) : nil
                // Across git's line, each end was reported moved in: what a directory holds is
                // reported after it.
                let crosses =
                    gitIgnoreEnds(
                        old: source.path.appending(bytes: from.name), new: target.path.appending(bytes: to.name),
                        firstIsDirectory: firstIsDirectory, secondIsDirectory: secondIsDirectory, for: subscription)
                    != nil
                let oldPaths = (first?.path, second?.path)
                if let first {
                    move(first, to: to.name, in: target, of: tree, for: subscription, seeingAnew: before == nil)
                }
                if let second {
                    move(second, to: from.name, in: source, of: tree, for: subscription, seeingAnew: before == nil)
                }
                if let before {
                    for (node, oldPath) in [(first, oldPaths.0), (second, oldPaths.1)] {
                        guard let node, let oldPath, tree.node(node.wd) === node else { continue }
                        if crosses {
                            reportContents(of: node, for: subscription, foundByRescan: false)
                        } else {
                            seeAnew(
                                node, at: node.path, wd: node.wd, before: before, oldPath: oldPath, for: subscription)
                        }
                    }
                }
                // A directory of which the tree had no node is watched under its new name (a
                // fanotify tree's not reached yet is reached by its listing, unless it was).
                if first == nil, firstIsDirectory, !tree.isLazy || firstUnreached != nil {
                    treeChanged(
                        to.name, at: target, appeared: true, for: subscription,
                        foundByRescan: firstUnreached?.foundByRescan ?? false,
                        reporting: firstUnreached?.reporting ?? true)
                }
                if second == nil, secondIsDirectory, !tree.isLazy || secondUnreached != nil {
                    treeChanged(
                        from.name, at: source, appeared: true, for: subscription,
                        foundByRescan: secondUnreached?.foundByRescan ?? false,
                        reporting: secondUnreached?.reporting ?? true)
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

    enum Half { case first, second }

    /// Which half of an exchange between `source`'s `from` and `target`'s `to` a tree's walk
    /// showed already: it met the directory that half moved at its new name, before the event
    /// (``TreeNode/metEarlyIn``), and reported it there with what it holds.
    /// Asked once the kept names follow the exchange: the directory met is the one that half
    /// moved, by the inode its name is known by now, when one is (a directory met early by
    /// another move, whose event came without the mark being cleared, is not taken for it).
    func arrivalSaid(_ source: TreeNode?, _ target: TreeNode?, _ from: BackendEvent, _ to: BackendEvent) -> Half? {
        guard let source, let target else { return nil }
        func isMoved(_ node: TreeNode, at name: ArraySlice<UInt8>, in directory: TreeNode) -> Bool {
            guard let inode = known[directory.wd]?.inode(name), node.inode != 0 else { return true }
            return inode == node.inode
        }
        if let node = source.child(from.name), node.metEarlyIn == target.wd, isMoved(node, at: from.name, in: source) {
            return .second
        }
        if let node = target.child(to.name), node.metEarlyIn == source.wd, isMoved(node, at: to.name, in: target) {
            return .first
        }
        return nil
    }
}
