import Glibc

/// Trees' events: a change in a tree's directory routed to its node, a directory renamed or moved
/// within, into or out of the tree followed, what could not be watched reported.
extension Router {
    /// A directory appeared in (created, moved in) or left (removed, moved out) the tree
    /// directory `node` of `subscription`.
    /// `retrying`: a directory refused before (``TreeNode/refused``), tried again.
    /// `told`: the watcher has just been told that the name holds a directory new there (a move
    /// in, a rename onto it, a creation), which tells a consumer to forget what it knew there.
    func treeChanged(
        _ name: ArraySlice<UInt8>, at node: TreeNode, appeared: Bool, for subscription: Subscription,
        foundByRescan: Bool, throughLink: Bool = false, reporting: Bool = true, retrying: Bool = false,
        told: Bool = false
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
                if told {
                    walkAgain(
                        met, of: tree, for: subscription, throughLink: throughLink, reporting: reporting,
                        foundByRescan: foundByRescan)
                }
                return
            }
            let path = node.path.appending(bytes: name)
            if let exclusions = subscription.exclusions, exclusions.excludes(path, under: subscription.root) { return }
            if subscription.gitIgnores != nil, gitIgnores(path, isDirectory: true, for: subscription) { return }
            if tree.isLazy, created(name, at: node, of: tree, for: subscription) { return }
            var step = WalkStep(parent: node, name: Array(name)[...], parentPath: node.path, throughLink: throughLink)
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

    /// The watcher was just told that the name of `met`, a directory the tree has a node for
    /// already (a walk met it first, and reported what it held), holds a directory new there: a
    /// consumer has forgotten what it held. The same directory (by its watch), what it holds is
    /// reported again; another one (a rename over an empty directory, which the kernel reports
    /// as a move in alone), `met` is let go and the newcomer walked. Its path stale (an
    /// ancestor's rename still to be routed, which is how the event could not be recognised as
    /// a repeat of the listing), it is tried again at its new path after that rename, what it
    /// holds owed meanwhile (``TreeNode/contentsOwed``).
    private func walkAgain(
        _ met: TreeNode, of tree: WatchedTree, for subscription: Subscription, throughLink: Bool, reporting: Bool,
        foundByRescan: Bool
    ) {
        guard let parent = met.parent else { return }
        let step = WalkStep(parent: parent, name: met.name[...], parentPath: parent.path, throughLink: throughLink)
        let result = walker(for: subscription, reporting: reporting)(step)
        if result.isWatched, result.handle == nil, result.wd == met.wd {
            if result.known != nil { expectListingEcho(met.wd) }
            if reporting { reportContents(of: met, for: subscription, foundByRescan: foundByRescan) }
            return
        }
        if !result.isWatched, let failure = result.failure, failure.errno == ENOENT || failure.errno == ENOTDIR {
            met.contentsOwed = true
            tree.unreached.append((parent, met.name, reporting, foundByRescan))
            return
        }
        for wd in tree.remove(met) { release(wd, for: subscription) }
        guard
            let child = adopt(
                step, result, of: tree, for: subscription, reporting: reporting, foundByRescan: foundByRescan)
        else { return }
        let level = integrate(
            result, at: child, path: result.path ?? step.path, of: tree, for: subscription, reporting: reporting,
            foundByRescan: foundByRescan)
        populate(level, of: tree, for: subscription, reporting: reporting, foundByRescan: foundByRescan)
    }

    /// Whether ``treeEvent(_:at:for:)`` has anything to do with `event`, by the same tests: an event
    /// about a file made or changed (most of them) is nothing to a tree, and the router skips the
    /// call.
    @inline(__always)
    static func treeEventMatters(_ event: BackendEvent, at node: TreeNode, followsLinks: Bool) -> Bool {
        if event.has(EventMask.isDirectory) { return true }
        if event.has(EventMask.create | EventMask.movedTo) { return followsLinks }
        return event.has(EventMask.delete | EventMask.movedFrom) && !node.children.isEmpty
    }

    /// An event about an entry of the tree directory `node`: a directory appeared or left; with
    /// links followed, an entry created may be a link to a directory (the watch is tried: a
    /// system call per entry created, which following links costs), and one removed may have
    /// been a followed link. (What it ignores, ``treeEventMatters(_:at:followsLinks:)`` tells.)
    func treeEvent(_ event: BackendEvent, at node: TreeNode, for subscription: Subscription) {
        let appeared = event.has(EventMask.create | EventMask.movedTo)
        if event.has(EventMask.isDirectory) {
            // Opened, listed, its attributes changed: still there, still watched. Its attributes
            // changed, it may be readable now.
            guard appeared || event.has(EventMask.delete | EventMask.movedFrom) else {
                if event.has(EventMask.attributes) { treeAttributesChanged(event.name, at: node, for: subscription) }
                return
            }
            treeChanged(
                event.name, at: node, appeared: appeared, for: subscription, foundByRescan: false, told: appeared)
        } else if !appeared, event.has(EventMask.delete | EventMask.movedFrom), !node.children.isEmpty {
            treeChanged(event.name, at: node, appeared: false, for: subscription, foundByRescan: false)
        } else if appeared, subscription.followsLinks {
            treeChanged(
                event.name, at: node, appeared: true, for: subscription, foundByRescan: false, throughLink: true,
                told: true)
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
        if tree.isLazy, let parent = node.parent, !parent.refused.isEmpty, parent.refused.contains(node.name) {
            // A fanotify tree's refused directory, given a node by the handle of its own event.
            treeChanged(
                node.name[...], at: parent, appeared: true, for: subscription, foundByRescan: false, retrying: true)
            return
        }
        for name in node.refused {
            treeChanged(name[...], at: node, appeared: true, for: subscription, foundByRescan: false, retrying: true)
        }
        if tree.isLazy, !known.contains(node.wd), !marked.snapshotQueue.contains(where: { $0.node === node }) {
            marked.snapshotQueue.append((subscription, node))
        }
    }

    /// A directory renamed or moved, as each recursive watcher sees it: inside its tree, the node
    /// follows (its watches stay, and the paths below it change with it); out of it, its watches
    /// go; into it, it is watched and its entries reported.
    /// Calls `body` once for each recursive watcher of either end of a move, with its tree and
    /// its nodes of the two directories (nil for an end it does not watch).
    func forEachTree(
        of sources: WatchTable<Subscription>.Watches, _ targets: WatchTable<Subscription>.Watches,
        _ body: (Subscription, WatchedTree, TreeNode?, TreeNode?) -> Void
    ) {
        var seen: Set<ObjectIdentifier> = []
        for watch in [sources, targets].joined() where !watch.subscriber.loop.isEnded {
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
        from: BackendEvent, to: BackendEvent, sources: WatchTable<Subscription>.Watches,
        targets: WatchTable<Subscription>.Watches, arrivalListed: Bool = false
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
                        foundByRescan: unreached?.foundByRescan ?? false, reporting: unreached?.reporting ?? true,
                        told: true)
                }
            }
        }
    }

    /// A directory of the tree renamed or moved inside it: its node follows, or, renamed to a name
    /// the watcher excludes, it is let go.
    /// `seeingAnew`: what git's rules make of what is below it at its new path is seen to
    /// here (an exchange sees to it once both of its directories have moved).
    func move(
        _ moved: TreeNode, to name: ArraySlice<UInt8>, in target: TreeNode, of tree: WatchedTree,
        for subscription: Subscription, seeingAnew: Bool = true
    ) {
        guard !target.isInside(moved) else { return }
        let destination = target.path.appending(bytes: name)
        if subscription.exclusions?.excludes(destination, under: subscription.root) == true
            || (subscription.gitIgnores != nil && gitIgnores(destination, isDirectory: true, for: subscription))
        {
            for wd in tree.remove(moved) { release(wd, for: subscription) }
        } else {
            // A directory the walk found under this name and could not open is not tried again:
            // the name holds the one moved, reported as it is.
            if !tree.unreached.isEmpty { tree.unreached.removeAll { $0.parent === target && $0.name[...] == name } }
            let before =
                subscription.gitIgnores != nil && seeingAnew
                ? gitRules(for: subscription).map { ($0, moved.path) } : nil
            tree.move(moved, to: Array(name), in: target)
            moved.metEarlyIn = -1
            // Other files' rules apply at its new path: what is below it is seen anew.
            if let (rules, oldPath) = before {
                seeAnew(moved, at: moved.path, wd: moved.wd, before: rules, oldPath: oldPath, for: subscription)
            }
            retryUnreached(in: tree, for: subscription)
            if tree.isLazy { retryUnlisted(in: tree, for: subscription) }
        }
    }

    /// Watches and lists, at their parents' paths now, the directories that could not be opened
    /// at the paths they were found at (``WatchedTree/unreached``).
    func retryUnreached(in tree: WatchedTree, for subscription: Subscription) {
        if subscription.gitIgnores != nil { readUnreadGitIgnores(in: tree, for: subscription) }
        guard !tree.unreached.isEmpty else { return }
        let unreached = tree.unreached
        tree.unreached = []
        for entry in unreached where tree.node(entry.parent.wd) === entry.parent {
            treeChanged(
                entry.name[...], at: entry.parent, appeared: true, for: subscription,
                foundByRescan: entry.foundByRescan, reporting: entry.reporting,
                told: entry.parent.child(entry.name[...])?.contentsOwed ?? false)
        }
    }

    /// A directory of a tree that could not be watched or listed. Gone already: nothing to say
    /// (its parent reports its removal). Otherwise the watcher is told that changes below it
    /// are not seen, and why: at once, or for the watch limit, in one notice for every directory
    /// it kept from being watched until the batch is handed over (``reportUnwatched()``).
    func treeFailed(_ error: SyscallError, at path: FileSystemPath, for subscription: Subscription) {
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
                kind: .failed, path: path, isDirectory: true,
                error: DirectoryWatcherError(error, path: path)), for: subscription)
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
                    kind: .failed, path: unwatched.first, isDirectory: true,
                    error: DirectoryWatcherError(unwatched.error, path: unwatched.first, detail: detail)),
                for: subscription)
        }
    }
}
