import Glibc

/// Trees and the mount table: mounts made and taken away inside a tree, and the end of the mount
/// a tree's root is on (see <doc:WatchingATree>, "Mounts").
///
/// While a tree watches, the loop polls `/proc/self/mountinfo` (proc(5): a change of the mount
/// table makes it report `EPOLLPRI`), and the router compares the table with the last one read,
/// by mount id:
///
/// - The mount a tree's root was on at the start is gone (`umount`, `umount -l`): the tree ends
///   with ``DirectoryChange/Kind/rootRemoved``, as an inotify tree does on `IN_UNMOUNT`. A
///   fanotify tree hears nothing else: its mark's descriptor of the mount keeps the file system
///   alive, and fanotify has no event for its end. (An inotify tree hears it from the table too
///   when something else keeps the file system alive, a process's working directory in it.)
/// - A mount made or taken away on a directory inside an inotify tree: the directory at that
///   path is now another one (the mount's root, or what it covered), which inotify's watch, on
///   the directory it was, does not see into. It is reported as removed and created again, with
///   what is in it now, and watched anew.
/// - A mount made inside a fanotify tree: its mark, of one file system, sees nothing in it. The
///   tree says so once, with an ``DirectoryChange/Kind/overflow`` notice whose error names the
///   mount point; what it covered is still what the tree reports. When it is taken away, the
///   directory is reported removed and created again, as for inotify.
extension Router {
    /// The mount table now, read whole; while it is polled, what changed since the last reading
    /// is handled first (so that a tree starting now starts from the table it reads).
    func mountTableNow() -> [MountTable.Mount] {
        let read = MountTable.mounts(in: table.system.readProcBytes("/proc/self/mountinfo") ?? [])
        if let last = mountFollowing.table, last != read {
            mountFollowing.table = read
            mountsChanged(from: last, to: read)
        }
        return read
    }

    /// The loop's poll of the mount table fired: what changed is handled.
    func mountTableChanged(now: UInt64) {
        assert(services.isOnLoopThread())
        guard mountFollowing.table != nil else { return }
        beginRead(now: now)
        _ = mountTableNow()
    }

    /// A tree that starts follows the mount table, from `read` (read before its directories were
    /// watched, so that a mount made meanwhile is a change of the table): the mount its root is on
    /// is noted, and the loop polls the table while a tree follows it.
    func followMounts(_ subscription: Subscription, from read: [MountTable.Mount]) {
        subscription.loop.rootMount = MountTable.mount(of: subscription.root, in: read)?.id
        subscription.loop.followsMounts = true
        mountFollowing.trees.append(subscription)
        guard mountFollowing.table == nil else { return }
        do {
            try services.openMountPoll()
        } catch {
            return  // (no poll: mounts are not followed; nothing else is lost)
        }
        mountFollowing.table = read
        // What changed before the poll was open.
        _ = mountTableNow()
    }

    /// A tree that followed the mount table ends: the poll goes with the last one.
    func stopFollowingMounts(_ subscription: Subscription) {
        subscription.loop.followsMounts = false
        mountFollowing.trees.removeAll { $0 === subscription }
        if mountFollowing.trees.isEmpty, mountFollowing.table != nil {
            mountFollowing.table = nil
            services.closeMountPoll()
        }
    }

    /// What a change of the mount table means for each tree that follows it.
    private func mountsChanged(from last: [MountTable.Mount], to read: [MountTable.Mount]) {
        let lastIDs = Set(last.map(\.id))
        let readIDs = Set(read.map(\.id))
        let gone = last.filter { !readIDs.contains($0.id) }
        let made = read.filter { !lastIDs.contains($0.id) }
        guard !gone.isEmpty || !made.isEmpty else { return }
        // A held move is routed before what a mount means for a tree, and only then: a mount
        // elsewhere (a container's, a removable disk's) must not split an exchange's halves.
        let concerns = { (mount: MountTable.Mount) in
            self.mountFollowing.trees.contains { subscription in
                !subscription.loop.isEnded
                    && (mount.id == subscription.loop.rootMount
                        || MountTable.isPrefix(subscription.root.bytes, of: mount.mountPoint.bytes))
            }
        }
        guard gone.contains(where: concerns) || made.contains(where: concerns) else { return }
        if held.isHolding { releaseHeldMove() }
        // Outer mounts first: what is below a mount point is looked up after it has been redone.
        let changed = (made.map { ($0, true) } + gone.map { ($0, false) }).sorted {
            $0.0.mountPoint.bytes.count < $1.0.mountPoint.bytes.count
        }
        var redone: [(wd: Int32, name: [UInt8])] = []
        for subscription in mountFollowing.trees where !subscription.loop.isEnded {
            let root = subscription.root
            if let id = subscription.loop.rootMount, gone.contains(where: { $0.id == id }) {
                collect(DirectoryChange(kind: .rootRemoved, path: root, isDirectory: true), for: subscription)
                continue
            }
            guard let tree = subscription.loop.tree else { continue }
            for (mount, appeared) in changed {
                let point = mount.mountPoint
                guard point.bytes.count > root.bytes.count, MountTable.isPrefix(root.bytes, of: point.bytes) else {
                    continue
                }
                if appeared, subscription.loop.markedFileSystem != nil {
                    collect(unseenMountNotice(point, in: subscription), for: subscription)
                    continue
                }
                guard let parent = node(at: point.parent, in: tree) else { continue }
                let name = Array(point.lastComponent.bytes)
                if !redone.contains(where: { $0.wd == parent.wd && $0.name == name }) {
                    redone.append((parent.wd, name))
                }
            }
        }
        // Once for each directory, whichever trees watch it: every watcher of its parent hears
        // of it through the same events.
        for (wd, name) in redone where isDirectory(name, in: wd) {
            handle(BackendEvent(wd: wd, mask: EventMask.delete | EventMask.isDirectory, name: name))
            handle(BackendEvent(wd: wd, mask: EventMask.create | EventMask.isDirectory, name: name))
        }
    }

    /// The notice a fanotify tree gives for a mount made inside it, which it does not see into.
    private func unseenMountNotice(_ point: FileSystemPath, in subscription: Subscription) -> DirectoryChange {
        let error = DirectoryWatcherError(
            code: .backendUnavailable, path: point, function: "fanotify", errno: EXDEV,
            detail:
                "a mount made inside the tree, which one mark of \(subscription.root)'s file system does not see into:"
                + " nothing in it is reported until it is taken away")
        return DirectoryChange(kind: .failed, path: point, isDirectory: true, error: error)
    }

    /// The node of the directory at `path` in `tree`, when the tree has one.
    private func node(at path: FileSystemPath, in tree: WatchedTree) -> TreeNode? {
        let root = tree.root.path.bytes
        guard MountTable.isPrefix(root, of: path.bytes) else { return nil }
        guard path.bytes.count > root.count else { return tree.root }
        var node = tree.root
        for name in path.bytes[(root.count == 1 ? 1 : root.count + 1)...].split(separator: UInt8(ascii: "/")) {
            guard let child = node.child(name) else { return nil }
            node = child
        }
        return node
    }

    /// Whether `name` is a directory in the directory of `wd` now.
    private func isDirectory(_ name: [UInt8], in wd: Int32) -> Bool {
        guard let path = table.watches(wd).first?.directory,
            let fd = try? table.system.openDirectoryReference(path, followingLinks: false)
        else { return false }
        defer { table.system.close(fd) }
        let status = try? table.system.entryStatus(in: fd, name: name)
        return status?.kind == .directory  // (try? flattens: nil for an error and for no such entry alike)
    }
}
