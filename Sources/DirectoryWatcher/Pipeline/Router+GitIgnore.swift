import Glibc

/// Watchers that leave out what git ignores (``DirectoryWatcher/Options/gitignore``): each
/// listed directory's `.gitignore` read with its listing, an ignored directory never walked, a
/// change about an ignored entry dropped, and a `.gitignore` that changes read again, what it
/// lets in reported as moved in and what it leaves out as moved out.
extension Router {
    static let gitIgnoreName: [UInt8] = Array(".gitignore".utf8)

    /// The descriptor a watcher's rules keep the watched directory's `.gitignore` under when it
    /// watches no tree (a tree's directories are kept under their own).
    static let gitIgnoreRootKey: Int32 = -1

    /// git's rules for `subscription` now, by path.
    func gitRules(for subscription: Subscription) -> GitIgnores? {
        guard let state = subscription.gitIgnores else { return nil }
        let tree = subscription.loop.tree
        return state.rules(epoch: tree?.epoch ?? 0) { wd in
            if let tree { return tree.node(wd)?.path }
            return wd == Self.gitIgnoreRootKey ? subscription.root : nil
        }
    }

    /// Whether git's rules leave out the entry at `path`, whose directory the watcher watches
    /// (so is not left out itself).
    func gitIgnores(_ path: FileSystemPath, isDirectory: Bool, for subscription: Subscription) -> Bool {
        guard let state = subscription.gitIgnores, let relative = state.relative(path),
            let rules = gitRules(for: subscription)
        else { return false }
        return rules.isIgnored(relative, isDirectory: isDirectory, ancestors: false)
    }

    /// A change as a watcher that leaves out what git ignores sees it: nil when git ignores its
    /// entry; a rename (or an exchange) with one name ignored, the arrival (`movedIn`) of the
    /// other, or its departure (`movedOut`).
    func gitFiltered(_ change: DirectoryChange, for subscription: Subscription) -> DirectoryChange? {
        switch change.kind {
        case .rootRemoved, .rootMoved, .overflow, .failed: return change
        default: break
        }
        let ignored = gitIgnores(change.path, isDirectory: change.isDirectory, for: subscription)
        guard change.kind == .renamed || change.kind == .exchanged, let old = change.oldPath else {
            return ignored ? nil : change
        }
        let oldIgnored = gitIgnores(old, isDirectory: change.isDirectory, for: subscription)
        switch (oldIgnored, ignored) {
        case (false, false): return change
        case (true, true): return nil
        case (true, false):
            return DirectoryChange(
                kind: .movedIn, path: change.path, isDirectory: change.isDirectory, foundByRescan: change.foundByRescan)
        case (false, true):
            return DirectoryChange(
                kind: change.kind == .exchanged ? .movedIn : .movedOut, path: old, isDirectory: change.isDirectory,
                foundByRescan: change.foundByRescan)
        }
    }

    /// Keeps the `.gitignore` a listing of the directory watched as `wd` read (nil: none), and
    /// leaves out of what the listing found what git's rules then ignore.
    func applyGitIgnore(_ result: inout Walked, wd: Int32, at path: FileSystemPath, for subscription: Subscription) {
        guard let state = subscription.gitIgnores else { return }
        state.set(result.gitIgnore.map { GitIgnoreList(parsing: $0) }, for: wd)
        guard let rules = gitRules(for: subscription) else { return }
        func ignores(_ name: some Collection<UInt8>, _ isDirectory: Bool) -> Bool {
            guard let relative = state.relative(path.appending(bytes: name)) else { return false }
            return rules.isIgnored(relative, isDirectory: isDirectory, ancestors: false)
        }
        result.subdirectories.removeAll { !$0.throughLink && ignores($0.name, true) }
        result.entries.removeAll { ignores($0.name, $0.isDirectory) }
    }

    /// An exchange of the entry at `old` (a directory when `firstIsDirectory`) with the one at
    /// `new` that crosses the line git's rules draw, for a watcher that reads them: whether each
    /// end was seen before (`new` holding the second entry, `old` the first) and is seen after.
    /// Nil when both ends are seen before and after: a plain exchange.
    func gitIgnoreEnds(
        old: FileSystemPath, new: FileSystemPath, firstIsDirectory: Bool, secondIsDirectory: Bool,
        for subscription: Subscription
    ) -> (newBefore: Bool, oldBefore: Bool, newAfter: Bool, oldAfter: Bool)? {
        guard subscription.gitIgnores != nil else { return nil }
        let ends = (
            newBefore: !gitIgnores(new, isDirectory: secondIsDirectory, for: subscription),
            oldBefore: !gitIgnores(old, isDirectory: firstIsDirectory, for: subscription),
            newAfter: !gitIgnores(new, isDirectory: firstIsDirectory, for: subscription),
            oldAfter: !gitIgnores(old, isDirectory: secondIsDirectory, for: subscription)
        )
        return ends.newBefore && ends.oldBefore && ends.newAfter && ends.oldAfter ? nil : ends
    }

    /// A move or an exchange whose ends may be named `.gitignore`: each such end's directory is
    /// read again.
    func gitIgnoresMoved(_ ends: [(event: BackendEvent, watches: WatchTable<Subscription>.Watches)]) {
        for (event, watches) in ends where event.name.elementsEqual(Self.gitIgnoreName) {
            for watch in watches where watch.subscriber.gitIgnores != nil && !watch.subscriber.loop.isEnded {
                gitIgnoreMayHaveChanged(
                    in: watch.node?.path ?? watch.directory, wd: event.wd, node: watch.node, for: watch.subscriber)
            }
        }
    }

    /// Reads again the `.gitignore` of each of the watcher's directories among `descriptors` that
    /// has one or had one, parents first: after a pause's batch (what changed while it was paused
    /// reported behind it), or after a rescan (one may have changed while the events were lost,
    /// or been exchanged with another, which no listing tells), once every directory is known as
    /// it is now, so that what a file lets in is found among its directory's entries.
    func readGitIgnores(of descriptors: [Int32], for subscription: Subscription) {
        guard let state = subscription.gitIgnores, !subscription.loop.isEnded else { return }
        let tree = subscription.loop.tree
        var directories: [(path: FileSystemPath, wd: Int32, node: TreeNode?)] = []
        for wd in descriptors where table.watches(wd).contains(where: { $0.subscriber === subscription }) {
            let node = tree?.node(wd)
            let key = node == nil ? Self.gitIgnoreRootKey : wd
            guard known[wd]?.contains(Self.gitIgnoreName[...]) == true || state.lists[key] != nil else { continue }
            directories.append((node?.path ?? subscription.root, wd, node))
        }
        for directory in directories.sorted(by: { $0.path.bytes.count < $1.path.bytes.count }) {
            gitIgnoreMayHaveChanged(in: directory.path, wd: directory.wd, node: directory.node, for: subscription)
        }
    }

    /// Reads again the `.gitignore` files that could not be read where the tree knew their
    /// directories (``GitIgnoreState/unread``): after a rename inside the tree.
    func readUnreadGitIgnores(in tree: WatchedTree, for subscription: Subscription) {
        guard let state = subscription.gitIgnores, !state.unread.isEmpty else { return }
        for wd in state.unread {
            guard let node = tree.node(wd) else {
                state.unread.remove(wd)
                continue
            }
            gitIgnoreMayHaveChanged(in: node.path, wd: wd, node: node, for: subscription)
        }
    }

    /// The `.gitignore` of the directory at `directory`, watched as `wd` (the tree's `node`, when
    /// it is one), may have changed: it is read again, and when its rules differ, what is below
    /// the directory is seen anew. What they leave out now is reported moved out (a directory let
    /// go); what they let in now is reported moved in (a directory watched, and what it holds
    /// reported as created, as for a directory moved in).
    func gitIgnoreMayHaveChanged(
        in directory: FileSystemPath, wd: Int32, node: TreeNode?, for subscription: Subscription
    ) {
        // Paused, the watcher keeps the rules it had: its resume reads them again
        // (``readGitIgnores(of:for:)``), once what it is told of the pause is out.
        guard let state = subscription.gitIgnores, !subscription.loop.isEnded, subscription.loop.pause == nil,
            let before = gitRules(for: subscription)
        else { return }
        // Read through the directory, once it is known to be the one watched: by its path alone,
        // a rename not routed yet would read another directory's file, or none.
        let contents: [UInt8]?
        do throws(SyscallError) {
            let fd = try table.system.openDirectory(directory)
            defer { table.system.close(fd) }
            if let node, node.inode != 0,
                let status = try table.system.entryStatus(in: fd, name: [UInt8(ascii: ".")]), status.inode != node.inode
            {
                state.unread.insert(wd)
                return
            }
            // One that cannot be read (a directory by that name, no permission) is none, as to git.
            contents = (try? table.system.readFile(named: Self.gitIgnoreName, in: fd)) ?? nil
        } catch {
            // Renamed (its rename still to come), or gone (its removal still to come).
            if node != nil { state.unread.insert(wd) }
            return
        }
        if node != nil, !state.unread.isEmpty { state.unread.remove(wd) }
        let key = node == nil ? Self.gitIgnoreRootKey : wd
        guard state.set(contents.map { GitIgnoreList(parsing: $0) }, for: key) else { return }
        seeAnew(node, at: directory, wd: wd, before: before, oldPath: directory, for: subscription)
    }

    /// What is below the directory at `directory` (watched as `wd`, the tree's `node` when it is
    /// one), under git's rules now against `before`, with the paths it had then below `oldPath`:
    /// an entry they leave out now is reported moved out (a directory let go), one they let in
    /// now moved in (a directory watched, and what it holds reported as created).
    func seeAnew(
        _ node: TreeNode?, at directory: FileSystemPath, wd: Int32, before: GitIgnores, oldPath: FileSystemPath,
        for subscription: Subscription
    ) {
        guard let state = subscription.gitIgnores else { return }
        let tree = subscription.loop.tree
        var stack: [(path: FileSystemPath, wd: Int32, node: TreeNode?)] = [(directory, wd, node)]
        let top = node
        while let (found, wd, node) = stack.popLast() {
            // A walk this one began (a directory let in) may have met a directory of the tree at
            // a new path and moved its node: the path is the node's now, and one moved out of
            // this directory, or let go, is not this directory's any more.
            var path = found
            if let node {
                guard tree?.node(node.wd) === node, top.map({ node.isInside($0) }) ?? true else { continue }
                path = node.path
            }
            let topPath = top?.path ?? directory
            guard path.bytes.count >= topPath.bytes.count, let after = gitRules(for: subscription) else { continue }
            // The same directory's path before, for the rules then.
            let pathBefore =
                oldPath == topPath ? path : FileSystemPath(bytes: oldPath.bytes + path.bytes[topPath.bytes.count...])
            var entries: [(name: [UInt8], isDirectory: Bool)] = []
            if let kept = known.entries(wd) {
                kept.forEach { name, entry in entries.append((Array(name), entry.isDirectory)) }
            } else {
                try? services.listNames(path) { name, _, kind in entries.append((Array(name), kind == .directory)) }
            }
            for (name, isDirectory) in entries {
                let entryPath = path.appending(bytes: name)
                guard let relative = state.relative(entryPath) else { continue }
                let isIgnored = after.isIgnored(relative, isDirectory: isDirectory, ancestors: false)
                if let tree, let child = node?.child(name[...]) {
                    if isIgnored {
                        collect(
                            DirectoryChange(kind: .movedOut, path: entryPath, isDirectory: true), for: subscription,
                            ignoresAside: true)
                        for wd in tree.remove(child) { release(wd, for: subscription) }
                    } else {
                        stack.append((entryPath, child.wd, child))
                    }
                    continue
                }
                let wasIgnored =
                    state.relative(pathBefore.appending(bytes: name)).map {
                        before.isIgnored($0, isDirectory: isDirectory, ancestors: false)
                    } ?? false
                guard wasIgnored != isIgnored else { continue }
                collect(
                    DirectoryChange(kind: isIgnored ? .movedOut : .movedIn, path: entryPath, isDirectory: isDirectory),
                    for: subscription, ignoresAside: true)
                if !isIgnored, isDirectory, let node {
                    treeChanged(name[...], at: node, appeared: true, for: subscription, foundByRescan: false)
                }
            }
        }
    }
}
