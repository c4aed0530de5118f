import Dispatch
import Glibc
import Synchronization

/// Trees: a recursive watcher's directories, watched before they are listed, followed through
/// renames and moves, let go when they leave (see <doc:WatchingATree> and ``WatchedTree``).
extension Router {
    /// The kernel-only bits of a tree directory's watch: directories only, no events for entries
    /// already unlinked, and every change of name (the directory's known names need them).
    private static let treeFlags = InotifyMask.onlyDirectory | InotifyMask.excludeUnlinked | InotifyMask.names
    static var treeWatchFlags: UInt32 { treeFlags | InotifyMask.dontFollow }

    /// One directory of a tree to watch and list, below a node already in the tree.
    private struct WalkStep {
        let parent: TreeNode
        let name: [UInt8]
        let path: FileSystemPath
        let throughLink: Bool
        /// The directory's inode as its parent's listing gave it; 0 when not listed (a directory
        /// an event brought), then read from the directory itself.
        var inode: UInt64 = 0
        /// A directory refused before (``TreeNode/refused``) tried again: refused again, it is
        /// not reported again.
        var retrying = false
    }

    /// What watching and listing one directory gave: all that can be made off the loop's
    /// thread is made where the directory was listed.
    private struct Walked {
        var wd: Int32 = -1
        /// The directory's inode (0: unknown).
        var inode: UInt64 = 0
        /// In a fanotify tree: the directory's handle, which ``adopt`` turns into its descriptor
        /// on the loop's thread.
        var handle: KernelHandle?
        var failure: SyscallError?
        /// The watch was added; the failure, if any, is the listing's.
        var isWatched = false
        /// The directory as listed.
        var known: KnownDirectory?
        /// The birth clock read before the listing began, the directory open meanwhile: its inode
        /// was no other directory's then, and one made later with its number is born after it.
        var listedAfter: Snapshot.Time?
        /// Every entry, when they are to be reported as created.
        var entries: [(name: [UInt8], isDirectory: Bool)] = []
        /// The directories to watch next (excludes applied).
        var subdirectories: [(name: [UInt8], path: FileSystemPath, throughLink: Bool, inode: UInt64)] = []
    }

    /// A level of a walk with this many directories or more is watched and listed on every core;
    /// below it, on the loop's thread alone (a directory made while watching, most often).
    static let parallelWalk = 64

    /// Lists `start`'s directory (watched already) and watches each subdirectory found, then
    /// lists those, and so on, a level at a time. Each directory is watched before it is listed,
    /// so nothing made in it is missed: what was made before the watch, the listing shows; what
    /// was made after, the kernel reports, and a name the listing showed already is recognised
    /// as a repeat by the directory's known names (``KnownDirectory/apply(_:at:)``). With
    /// `reporting` (a directory that appeared while watching), what the listings find is
    /// reported as created.
    ///
    /// The system calls of a large level (``parallelWalk``) run on every core: no event is read
    /// meanwhile (this runs as one of the loop's tasks, or while it routes an event), so the
    /// descriptors they return are all in the table before any event about them is routed.
    func populate(
        _ start: TreeNode, of tree: WatchedTree, for subscription: Subscription, reporting: Bool, foundByRescan: Bool
    ) {
        var first = Walked(wd: start.wd, isWatched: true)
        do {
            let fd = try table.system.openDirectory(start.path)
            defer { table.system.close(fd) }
            list(fd, at: start.path, into: &first, for: subscription, reporting: reporting)
        } catch {
            first.failure = error
        }
        let level = integrate(
            first, at: start, path: start.path, of: tree, for: subscription, reporting: reporting,
            foundByRescan: foundByRescan)
        populate(level, of: tree, for: subscription, reporting: reporting, foundByRescan: foundByRescan)
    }

    /// Watches and lists the directories of `level`, then those found in them, and so on.
    private func populate(
        _ level: [WalkStep], of tree: WatchedTree, for subscription: Subscription, reporting: Bool,
        foundByRescan: Bool
    ) {
        var level = level
        while !level.isEmpty {
            var next: [WalkStep] = []
            walk(level, for: subscription, reporting: reporting) { step, result in
                guard
                    let node = adopt(
                        step, result, of: tree, for: subscription, reporting: reporting, foundByRescan: foundByRescan)
                else { return }
                next += integrate(
                    result, at: node, path: step.path, of: tree, for: subscription, reporting: reporting,
                    foundByRescan: foundByRescan)
            }
            level = next
        }
    }

    /// Watches and lists each directory of a level, and hands each result to `record` on this
    /// thread, in the level's order. A large level is walked on every core: the other cores'
    /// threads take its directories in turn, and this thread records each result as soon as it
    /// is ready, walking the next directory itself whenever it would otherwise wait.
    private func walk(
        _ level: [WalkStep], for subscription: Subscription, reporting: Bool, record: (WalkStep, Walked) -> Void
    ) {
        let one = walker(for: subscription, reporting: reporting)
        guard level.count >= Self.parallelWalk else {
            for step in level { record(step, one(step)) }
            return
        }
        let work = LevelWalk(level, one)
        let helpers = DispatchGroup()
        for _ in 0..<max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) - 1) {
            DispatchQueue.global().async(group: helpers) { work.walkAll() }
        }
        for index in level.indices { record(level[index], work.result(index)) }
        helpers.wait()
    }

    /// Watches and lists one directory: its system calls alone, touching no state of the
    /// router, so it may run on any thread.
    ///
    /// The directory is opened first, then watched through that descriptor, then listed through
    /// it: the watch and the listing are of one directory even when it is renamed meanwhile (by
    /// path, a rename between the watch and the listing left the directory watched and never
    /// listed, and what had been made in it before its watch was lost).
    private func walker(for subscription: Subscription, reporting: Bool) -> (WalkStep) -> Walked {
        let table = self.table
        let mask = subscription.mask
        let follows = subscription.followsLinks
        let fanotifyID = subscription.loop.fanotifyID
        return { step in
            var result = Walked()
            do throws(SyscallError) {
                // Not following links unless asked: a directory replaced by a link since it was
                // listed is refused (ELOOP) rather than followed out of the tree.
                let fd = try table.system.openDirectory(step.path, followingLinks: follows || step.throughLink)
                defer { table.system.close(fd) }
                if let fanotifyID {
                    // The file system's mark sees it already: its handle is all it needs.
                    result.handle = try table.system.fileHandle(in: fd, name: nil, fileSystemID: fanotifyID)
                } else {
                    result.wd = try table.kernelWatch(openDirectory: fd, mask: mask, flags: Self.treeFlags)
                }
                result.isWatched = true
                result.inode = step.inode
                if result.inode == 0, !step.throughLink {
                    result.inode = (try? table.system.entryStatus(in: fd, name: [UInt8(ascii: ".")]))??.inode ?? 0
                }
                self.list(fd, at: step.path, into: &result, for: subscription, reporting: reporting)
            } catch {
                result.failure = error
            }
            return result
        }
    }

    /// Lists the directory open as `fd` (found at `path`) into `result`. Touches no state of the
    /// router: it may run on any thread.
    private func list(
        _ fd: Int32, at path: FileSystemPath, into result: inout Walked, for subscription: Subscription,
        reporting: Bool
    ) {
        let begun = services.birthClock()
        var listing: [(name: [UInt8], inode: UInt64, isDirectory: Bool)] = []
        var subdirectories: [(name: [UInt8], path: FileSystemPath, throughLink: Bool, inode: UInt64)] = []
        let follows = subscription.followsLinks
        do {
            try Snapshot.readNames(directory: fd, system: table.system) { name, inode, kind in
                let name = Array(name)
                listing.append((name, inode, kind == .directory))
                let isLink = follows && kind == .symbolicLink
                guard kind == .directory || isLink else { return }
                let childPath = path.appending(bytes: name[...])
                if let exclusions = subscription.exclusions, exclusions.excludes(childPath, under: subscription.root) {
                    return
                }
                subdirectories.append((name, childPath, isLink, isLink ? 0 : inode))
            }
        } catch {
            result.failure = error
            return
        }
        result.known = KnownDirectory(listing: listing, listedAfter: begun, at: services.wallClock())
        result.listedAfter = begun
        result.subdirectories = subdirectories
        if reporting { result.entries = listing.map { ($0.name, $0.isDirectory) } }
    }

    /// The node of a directory the walk watched, new in the tree; nil when there is nothing more
    /// to do for it: it could not be watched, or its descriptor is in the tree already. Reached by
    /// its own name, such a directory moved while its events were lost (a rescan found it here):
    /// its node moves. Reached through a link, it stays where it was reached first (a loop, or a
    /// second link to it).
    private func adopt(
        _ step: WalkStep, _ walked: Walked, of tree: WatchedTree, for subscription: Subscription, reporting: Bool,
        foundByRescan: Bool
    ) -> TreeNode? {
        var result = walked
        if let handle = result.handle { result.wd = fanotify.marks.descriptor(for: handle) }
        guard result.isWatched else {
            // A link that leads nowhere, or to a file, is no directory to watch.
            guard let failure = result.failure, !step.throughLink else { return nil }
            if failure.errno == ENOENT || failure.errno == ENOTDIR {
                // Removed since it was listed, or an ancestor renamed (or exchanged with a file,
                // ENOTDIR): then the rename's event is still to come, and the directory is tried
                // again at its new path after it.
                tree.unreached.append((step.parent, step.name, reporting, foundByRescan))
            }
            if failure.errno == EACCES || failure.errno == EPERM {
                // Tried again when its attributes change; still refused, it was said already.
                step.parent.refused.insert(step.name)
                if step.retrying { return nil }
            }
            treeFailed(failure, at: step.path, for: subscription)
            return nil
        }
        if !step.parent.refused.isEmpty { step.parent.refused.remove(step.name) }
        if let existing = tree.node(result.wd) {
            table.insert(subscription, wd: result.wd, directory: step.path, mask: subscription.mask, node: existing)
            if !step.throughLink, !existing.isRoot, !step.parent.isInside(existing) {
                // What its old name holds now is another entry, found as such when the old
                // parent is listed (a directory exchanged across directories while the events
                // were lost), not the same directory by its name.
                // (The walk read its inode: the same directory, by its descriptor or handle.)
                if existing.inode == 0 { existing.inode = result.inode }
                if let parent = existing.parent {
                    known[parent.wd]?.vouch(existing.name[...], directoryInode: existing.inode)
                }
                // Met by a walk while watching: the event that moved it here is still to come.
                existing.metEarlyIn = foundByRescan ? -1 : existing.parent?.wd ?? -1
                if existing.metEarlyIn != -1 { tree.metEarlyNames[existing.wd] = existing.name }
                tree.move(existing, to: step.name, in: step.parent)
                // Reported as created with its parent's entries, it is news to the watcher here,
                // and so is what it holds: its move's events were lost, or are still to come
                // (a move out, which lets its old path go; a rename over this path).
                if reporting { reportContents(of: existing, for: subscription, foundByRescan: foundByRescan) }
                // Directories below it that a walk could not reach at its old path are reached now.
                retryUnreached(in: tree, for: subscription)
            }
            return nil
        }
        let node = tree.add(step.name, of: step.parent, wd: result.wd)
        node.inode = result.inode
        // Brought by an event, its parent knows it by name alone: by its inode from now on, with
        // the listing's birth bound (removed while events are lost, its number may be reused).
        if step.inode == 0, let begun = result.listedAfter {
            known[step.parent.wd]?.vouch(step.name[...], directoryInode: result.inode, bornBy: begun.justBefore)
        }
        table.insert(subscription, wd: result.wd, directory: step.path, mask: subscription.mask, node: node)
        return node
    }

    /// Reports what a directory of the tree met again at a new path holds, as created: what the
    /// watcher knows of it and of each directory below it, parents first.
    private func reportContents(of node: TreeNode, for subscription: Subscription, foundByRescan: Bool) {
        guard subscription.mask & InotifyMask.create != 0 else { return }
        var stack = [node]
        while let next = stack.popLast() {
            let path = next.path
            var entries: [(name: [UInt8], isDirectory: Bool)] = []
            if let directory = known[next.wd] {
                directory.entries.forEach { name, known in entries.append((Array(name), known.isDirectory)) }
            } else {
                try? services.listNames(path) { name, _, kind in entries.append((Array(name), kind == .directory)) }
            }
            for entry in entries {
                collect(
                    DirectoryChange(
                        kind: .created, path: path.appending(bytes: entry.name[...]), isDirectory: entry.isDirectory,
                        foundByRescan: foundByRescan),
                    for: subscription)
            }
            stack += next.children.values
        }
    }

    /// Records what the listing of `node`'s directory found, reports it when `reporting`, and
    /// returns the subdirectories to watch next.
    private func integrate(
        _ result: Walked, at node: TreeNode, path: FileSystemPath, of tree: WatchedTree,
        for subscription: Subscription, reporting: Bool, foundByRescan: Bool
    ) -> [WalkStep] {
        guard let directory = result.known else {
            if let failure = result.failure {
                // Removed before it was listed: nothing in it was reported, so what its events
                // say left it (a directory moved on from it) comes from nowhere.
                if reporting, failure.errno == ENOENT, known[node.wd] == nil {
                    known[node.wd] = KnownDirectory(
                        listing: [], listedAfter: services.birthClock(), at: services.wallClock())
                }
                treeFailed(failure, at: path, for: subscription)
            }
            return []
        }
        expectListingEcho(node.wd)
        if known[node.wd] == nil { known[node.wd] = directory }
        if reporting && subscription.mask & InotifyMask.create != 0 {
            for entry in result.entries {
                collect(
                    DirectoryChange(
                        kind: .created, path: path.appending(bytes: entry.name[...]), isDirectory: entry.isDirectory,
                        foundByRescan: foundByRescan),
                    for: subscription)
            }
        }
        return result.subdirectories.map {
            WalkStep(parent: node, name: $0.name, path: $0.path, throughLink: $0.throughLink, inode: $0.inode)
        }
    }

    /// A directory appeared in (created, moved in) or left (removed, moved out) the tree
    /// directory `node` of `subscription`.
    /// `retrying`: a directory refused before (``TreeNode/refused``), tried again.
    func treeChanged(
        _ name: ArraySlice<UInt8>, at node: TreeNode, appeared: Bool, for subscription: Subscription,
        foundByRescan: Bool, throughLink: Bool = false, reporting: Bool = true, retrying: Bool = false
    ) {
        guard let tree = subscription.loop.tree, tree.node(node.wd) === node else { return }
        if !tree.unreached.isEmpty { tree.unreached.removeAll { $0.parent === node && $0.name[...] == name } }
        // Gone, or another directory by that name: what was said of the refused one is said.
        if !retrying, !node.refused.isEmpty { node.refused.remove(Array(name)) }
        if appeared {
            if tree.isLazy, let early = node.child(name) {
                // Met before the event that brought it (the listing after readiness, or an event
                // inside it, reached it first): what it holds is news all the same, so it is
                // walked afresh and reported.
                for wd in tree.remove(early) { release(wd, for: subscription) }
            }
            if let met = node.child(name) {
                met.metEarlyIn = -1  // met by a walk before this event, which brings it
                return
            }
            let path = node.path.appending(bytes: name)
            if let exclusions = subscription.exclusions, exclusions.excludes(path, under: subscription.root) { return }
            if tree.isLazy, created(name, at: node, of: tree, for: subscription) { return }
            var step = WalkStep(parent: node, name: Array(name), path: path, throughLink: throughLink)
            step.retrying = retrying
            let result = walker(for: subscription, reporting: reporting)(step)
            guard
                let child = adopt(
                    step, result, of: tree, for: subscription, reporting: reporting, foundByRescan: foundByRescan)
            else { return }
            let level = integrate(
                result, at: child, path: path, of: tree, for: subscription, reporting: reporting,
                foundByRescan: foundByRescan)
            populate(level, of: tree, for: subscription, reporting: reporting, foundByRescan: foundByRescan)
        } else if let child = node.child(name) {
            // Its watches go with it; what was below it is not reported one by one.
            for wd in tree.remove(child) { release(wd, for: subscription) }
        } else if !tree.metEarlyNames.isEmpty {
            tree.departed(name, from: node)
        }
    }

    /// An event about an entry of the tree directory `node`: a directory appeared or left; with
    /// links followed, an entry created may be a link to a directory (the watch is tried: a
    /// system call per entry created, which following links costs), and one removed may have
    /// been a followed link.
    func treeEvent(_ event: InotifyEvent, at node: TreeNode, for subscription: Subscription) {
        let appeared = event.has(InotifyMask.create | InotifyMask.movedTo)
        if event.has(InotifyMask.isDirectory) {
            // Opened, listed, its attributes changed: still there, still watched. Its attributes
            // changed, it may be readable now.
            guard appeared || event.has(InotifyMask.delete | InotifyMask.movedFrom) else {
                if event.has(InotifyMask.attributes) { treeAttributesChanged(event.name, at: node, for: subscription) }
                return
            }
            treeChanged(event.name, at: node, appeared: appeared, for: subscription, foundByRescan: false)
        } else if !appeared, !node.children.isEmpty, event.has(InotifyMask.delete | InotifyMask.movedFrom) {
            treeChanged(event.name, at: node, appeared: false, for: subscription, foundByRescan: false)
        } else if appeared, subscription.followsLinks {
            treeChanged(
                event.name, at: node, appeared: true, for: subscription, foundByRescan: false, throughLink: true)
        }
    }

    /// The attributes of the directory `name` of the tree directory `node` changed (its parent's
    /// `IN_ATTRIB`): refused for want of permission, it is tried again, and once readable,
    /// watched and listed, and what it holds reported as created, as for a directory moved in.
    func treeAttributesChanged(_ name: ArraySlice<UInt8>, at node: TreeNode, for subscription: Subscription) {
        guard let tree = subscription.loop.tree, tree.node(node.wd) === node else { return }
        if let child = node.child(name) {
            directoryAttributesChanged(child, for: subscription)
        } else if !node.refused.isEmpty, node.refused.contains(Array(name)) {
            treeChanged(name, at: node, appeared: true, for: subscription, foundByRescan: false, retrying: true)
        }
    }

    /// The attributes of the tree directory `node` itself changed (its own event, or its
    /// parent's): the subdirectories it refused are tried again, and a fanotify tree's directory
    /// that its listing could not read (nothing was said of it: its events are seen all the same)
    /// is listed again, for exact recovery after an overflow.
    func directoryAttributesChanged(_ node: TreeNode, for subscription: Subscription) {
        guard let tree = subscription.loop.tree, tree.node(node.wd) === node else { return }
        if tree.isLazy, let parent = node.parent, parent.refused.contains(node.name) {
            // A fanotify tree's refused directory, given a node by the handle of its own event.
            treeChanged(
                node.name[...], at: parent, appeared: true, for: subscription, foundByRescan: false, retrying: true)
            return
        }
        for name in node.refused {
            treeChanged(name[...], at: node, appeared: true, for: subscription, foundByRescan: false, retrying: true)
        }
        if tree.isLazy, known[node.wd] == nil, !fanotify.snapshotQueue.contains(where: { $0.node === node }) {
            fanotify.snapshotQueue.append((subscription, node))
        }
    }

    /// A directory renamed or moved, as each recursive watcher sees it: inside its tree, the node
    /// follows (its watches stay, and the paths below it change with it); out of it, its watches
    /// go; into it, it is watched and its entries reported.
    /// Calls `body` once for each recursive watcher of either end of a move, with its tree and
    /// its nodes of the two directories (nil for an end it does not watch).
    func forEachTree(
        of sources: [WatchTable<Subscription>.Watch], _ targets: [WatchTable<Subscription>.Watch],
        _ body: (Subscription, WatchedTree, TreeNode?, TreeNode?) -> Void
    ) {
        var seen: Set<ObjectIdentifier> = []
        for watch in sources + targets where !watch.subscriber.loop.isEnded {
            let subscription = watch.subscriber
            guard let tree = subscription.loop.tree, seen.insert(ObjectIdentifier(subscription)).inserted else {
                continue
            }
            body(
                subscription, tree, sources.first { $0.subscriber === subscription }?.node,
                targets.first { $0.subscriber === subscription }?.node)
        }
    }

    /// `arrivalListed`: the target's listing, read after the move, showed the directory there
    /// already, and the walk that listing began reported it with what it holds.
    func treeMoved(
        from: InotifyEvent, to: InotifyEvent, sources: [WatchTable<Subscription>.Watch],
        targets: [WatchTable<Subscription>.Watch], arrivalListed: Bool = false
    ) {
        forEachTree(of: sources, targets) { subscription, tree, source, target in
            // A directory a walk met here before this move: its move is routed now.
            target?.child(to.name)?.metEarlyIn = -1
            if let source, let target, let moved = source.child(from.name), tree.node(target.wd) === target {
                move(moved, to: to.name, in: target, of: tree, for: subscription)
            } else if arrivalListed {
                // Its departure alone is left: walked again at its new path (a fanotify tree walks
                // a directory it met early afresh), what it holds would be reported twice.
                if let source {
                    treeChanged(from.name, at: source, appeared: false, for: subscription, foundByRescan: false)
                }
            } else if tree.isLazy, let source, target != nil,
                !tree.unreached.contains(where: { $0.parent === source && $0.name[...] == from.name }),
                !(subscription.exclusions?.excludes(source.path.appending(bytes: from.name), under: subscription.root)
                    ?? false)
            {
                // Inside a fanotify tree, with no node: nothing of it is followed by name yet.
                return
            } else {
                // A directory the walk could not reach at its old path (``WatchedTree/unreached``)
                // is reported as it would have been there.
                let unreached = source.flatMap { source in
                    tree.unreached.first { $0.parent === source && $0.name[...] == from.name }
                }
                if let source {
                    treeChanged(from.name, at: source, appeared: false, for: subscription, foundByRescan: false)
                }
                if let target {
                    treeChanged(
                        to.name, at: target, appeared: true, for: subscription,
                        foundByRescan: unreached?.foundByRescan ?? false, reporting: unreached?.reporting ?? true)
                }
            }
        }
    }

    /// A directory of the tree renamed or moved inside it: its node follows, or, renamed to a name
    /// the watcher excludes, it is let go.
    func move(
        _ moved: TreeNode, to name: ArraySlice<UInt8>, in target: TreeNode, of tree: WatchedTree,
        for subscription: Subscription
    ) {
        guard !target.isInside(moved) else { return }
        if let exclusions = subscription.exclusions,
            exclusions.excludes(target.path.appending(bytes: name), under: subscription.root)
        {
            for wd in tree.remove(moved) { release(wd, for: subscription) }
        } else {
            // A directory the walk found under this name and could not open is not tried again:
            // the name holds the one moved, reported as it is.
            if !tree.unreached.isEmpty { tree.unreached.removeAll { $0.parent === target && $0.name[...] == name } }
            tree.move(moved, to: Array(name), in: target)
            moved.metEarlyIn = -1
            retryUnreached(in: tree, for: subscription)
            if tree.isLazy { retryUnlisted(in: tree, for: subscription) }
        }
    }

    /// Watches and lists, at their parents' paths now, the directories that could not be opened
    /// at the paths they were found at (``WatchedTree/unreached``).
    private func retryUnreached(in tree: WatchedTree, for subscription: Subscription) {
        guard !tree.unreached.isEmpty else { return }
        let unreached = tree.unreached
        tree.unreached = []
        for entry in unreached where tree.node(entry.parent.wd) === entry.parent {
            treeChanged(
                entry.name[...], at: entry.parent, appeared: true, for: subscription,
                foundByRescan: entry.foundByRescan, reporting: entry.reporting)
        }
    }

    /// A directory of a tree that could not be watched or listed. Gone already: nothing to say
    /// (its parent reports its removal). Otherwise the watcher is told that changes below it
    /// are not seen, and why: at once, or for the watch limit, in one notice for every directory
    /// it kept from being watched until the batch is handed over (``reportUnwatched()``).
    private func treeFailed(_ error: SyscallError, at path: FileSystemPath, for subscription: Subscription) {
        // Gone, or no longer a directory (a link in its place, not followed): its parent's events
        // say so.
        guard error.errno != ENOENT && error.errno != ENOTDIR && error.errno != ELOOP else { return }
        if error.errno == ENOSPC, let tree = subscription.loop.tree {
            if tree.unwatched == nil {
                tree.unwatched = (error, path, 0)
                outbox.unwatchedTrees.append(subscription)
            }
            tree.unwatched?.count += 1
            return
        }
        collect(
            DirectoryChange(
                kind: .overflow, path: path, isDirectory: true,
                error: DirectoryWatcherError(error, path: path.description)), for: subscription)
    }

    /// Tells each tree whose directories could not be watched for the watch limit since it was
    /// last told, in one notice: the first of them, how many, how many of its directories are
    /// watched (as ``DirectoryWatcher/watchedDirectories()`` counts them then), and the limit.
    /// Once per batch: a walk, the events of a wake-up (many directories made at once), a rescan.
    func reportUnwatched() {
        let trees = outbox.unwatchedTrees
        outbox.unwatchedTrees = []
        for subscription in trees {
            guard let tree = subscription.loop.tree, let unwatched = tree.unwatched else { continue }
            tree.unwatched = nil
            guard !subscription.loop.isEnded else { continue }
            let others =
                unwatched.count > 1
                ? "this directory and \(unwatched.count - 1) others of this tree could not be watched; " : ""
            let limit = table.system.watchLimit().map { "the limit is \($0) watches for this user" }
            let detail =
                others + "\(tree.count) directories of this tree are watched; "
                + (limit ?? "the limit could not be read") + ", shared by every program of the user"
            collect(
                DirectoryChange(
                    kind: .overflow, path: unwatched.first, isDirectory: true,
                    error: DirectoryWatcherError(unwatched.error, path: unwatched.first.description, detail: detail)),
                for: subscription)
        }
    }
}

/// A large level of a tree's walk, shared by the threads that watch and list it. Each thread
/// takes the next directory not yet taken (an atomic counter), walks it, writes its result at its
/// index and marks it ready; the loop's thread reads the results in order, and walks directories
/// itself while the one it needs next is not ready.
private final class LevelWalk<Step, Result>: @unchecked Sendable {
    private let steps: [Step]
    private let one: (Step) -> Result
    private let results: UnsafeMutableBufferPointer<Result?>
    private let ready: UnsafeMutablePointer<Atomic<Bool>>
    private let taken = Atomic<Int>(0)

    init(_ steps: [Step], _ one: @escaping (Step) -> Result) {
        self.steps = steps
        self.one = one
        results = .allocate(capacity: steps.count)
        results.initialize(repeating: nil)
        ready = .allocate(capacity: steps.count)
        for index in steps.indices { (ready + index).initialize(to: Atomic(false)) }
    }

    deinit {
        results.deinitialize()
        results.deallocate()
        ready.deinitialize(count: steps.count)
        ready.deallocate()
    }

    /// Walks directories until none is left to take.
    func walkAll() {
        while walkNext() {}
    }

    /// Takes and walks the next directory; false when every one was taken.
    private func walkNext() -> Bool {
        let index = taken.wrappingAdd(1, ordering: .relaxed).oldValue
        guard index < steps.count else { return false }
        results[index] = one(steps[index])
        ready[index].store(true, ordering: .releasing)
        return true
    }

    /// The result at `index`, once ready; this thread walks others meanwhile.
    func result(_ index: Int) -> Result {
        while !ready[index].load(ordering: .acquiring) {
            if !walkNext() { sched_yield() }
        }
        let result = results[index]!
        results[index] = nil
        return result
    }
}
