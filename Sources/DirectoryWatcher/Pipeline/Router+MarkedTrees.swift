import Glibc

/// Trees watched through a backend that marks a whole file system (``FileSystemMarkBackend``,
/// fanotify's): one mark, records that name a directory by its file handle and an entry by its
/// name (``MarkEvent``), turned into the ``BackendEvent``s the rest of the router understands (see
/// <doc:WatchingATree>, "fanotify").
///
/// Nothing is walked before the watcher is ready: the root's handle is read and the file system
/// marked, and that is all. A handle an event names that the table does not know is resolved
/// then (`open_by_handle_at` against the root's mount, and the path of that descriptor): inside a
/// tree, the directories from the root down to it get nodes and descriptors; outside, the handle
/// is remembered as outside, so the next event there costs one lookup. After the watcher is
/// ready, the loop lists the tree's directories a slice at a time between reads
/// (``continueSnapshots()``), so that a lost event (the queue overflowed) is recovered exactly,
/// as inotify's trees are, once that listing has reached the directory.
extension Router {
    /// How long one slice of the listing after readiness may hold up the loop.
    static let snapshotSlice: UInt64 = 2_000_000
    /// How long the listing may hold up readiness: a tree of a few thousand directories is listed
    /// whole in it.
    static let snapshotBeforeReady: UInt64 = 10_000_000

    /// Watches a tree through fanotify, or throws why it cannot (``SyscallError/detail``).
    func subscribeMarked(_ subscription: Subscription) throws(SyscallError) {
        let root = subscription.root
        func refuse(_ errno: Int32, _ why: String) -> SyscallError {
            var error = SyscallError(function: "fanotify", errno: errno)
            error.detail = why
            error.refusesBackend = true
            return error
        }
        if subscription.followsLinks {
            throw refuse(EINVAL, "fanotify does not follow symbolic links out of the tree; inotify does")
        }
        func refuse(_ error: SyscallError, _ what: String) -> SyscallError {
            let why =
                error.errno == EPERM
                ? "fanotify needs CAP_SYS_ADMIN to mark a whole file system, which this process has not"
                : "\(what) failed: \(SyscallError.describe(error.errno))"
            return refuse(error.errno, why)
        }
        if let refusal = marked.backend.refusal { throw refusal }
        do {
            try marked.backend.openGroup()
        } catch {
            throw refuse(error, "fanotify_init")
        }
        let directory = try table.system.openDirectory(root)
        defer { table.system.close(directory) }
        let id = try table.system.fileSystemID(directory)
        let handle: KernelHandle
        do {
            handle = try table.system.fileHandle(in: directory, name: nil, fileSystemID: id)
        } catch {
            throw refuse(error.errno, "the file system of \(root) gives no file handles (\(error))")
        }
        let mounts = mountTableNow()
        if let inside = mounts.first(where: {
            $0.mountPoint.bytes.count > root.bytes.count && MountTable.isPrefix(root.bytes, of: $0.mountPoint.bytes)
        }) {
            throw refuse(
                EXDEV,
                "\(inside.mountPoint) is a mount inside the tree, which one mark of \(root)'s file system does not see")
        }
        // Handles are opened against the mount's own root, which cannot be removed while it is
        // mounted: a descriptor of the tree's root would keep it from being freed when it is
        // removed, and so hold back the event that says so.
        let mountPoint = MountTable.mount(of: root, in: mounts)?.mountPoint ?? FileSystemPath("/")
        // (Open for reading: open_by_handle_at refuses an O_PATH descriptor, EBADF.)
        let mount = try table.system.openDirectory(mountPoint)
        var keepsMount = false
        defer { if !keepsMount { table.system.close(mount) } }
        do {
            // Marked through the mount's descriptor: a root deeper than PATH_MAX has no path to give.
            keepsMount = try marked.backend.mark(
                FileSystemPath("/proc/self/fd/\(mount)"), directory: mount, id: id,
                selecting: subscription.mask)
        } catch {
            let refusal = refuse(error, "fanotify_mark of \(root)'s file system")
            if error.errno == EPERM { marked.backend.refusal = refusal }
            marked.backend.closeGroupIfUnused()
            throw refusal
        }
        let wd = marked.descriptor(for: handle)
        let tree = WatchedTree(rootPath: root, wd: wd)
        tree.isLazy = true
        subscription.loop.tree = tree
        subscription.loop.markedFileSystem = id
        table.insert(subscription, wd: wd, directory: root, mask: subscription.mask, node: tree.root)
        admit(subscription)
        marked.trees.append(subscription)
        followMounts(subscription, from: mounts)
        marked.wanted |= subscription.mask | EventMask.names
        // What was outside the trees may be inside this one; directories other trees know that
        // lie inside it get nodes in this one too.
        marked.forgetOutside()
        for (known, descriptor) in marked.backend.allDescriptors where descriptor != wd {
            guard Array(known.fileSystemID) == id, let path = table.watches(descriptor).first?.directory,
                path.bytes.count > root.bytes.count, MountTable.isPrefix(root.bytes, of: path.bytes)
            else { continue }
            var early = false
            _ = materialize(path, handle: known, in: subscription, early: &early)
        }
        marked.snapshotQueue.append((subscription, tree.root))
        // A small tree is listed whole before the watcher is ready, a large one for this long and
        // then between reads: until the listing has reached a directory, its events are placed by
        // resolving its handle, which fails once it is removed.
        continueSnapshots(for: Self.snapshotBeforeReady)
    }

    /// A directory created in a lazy tree (``MarkedTrees/creatingDirectory`` is its handle): it gets a node,
    /// and is known, empty, as it was made. Returns false when its handle is not known (a kernel
    /// without `FAN_REPORT_TARGET_FID`): it is then walked as inotify's trees walk theirs.
    func created(_ name: ArraySlice<UInt8>, at node: TreeNode, of tree: WatchedTree, for subscription: Subscription)
        -> Bool
    {
        guard let handle = marked.creatingDirectory else { return false }
        let path = node.path.appending(bytes: name)
        let wd = marked.descriptor(for: handle)
        if let met = tree.node(wd) {
            // Met by a walk elsewhere first, where a rename or an exchange still to come puts it
            // (the walk said it there): that move's event is the one it was met early for.
            if met.parent !== node || met.name[...] != name { met.metEarlyIn = node.wd }
            return true
        }
        let child = tree.add(Array(name), of: node, wd: wd)
        table.insert(subscription, wd: wd, directory: path, mask: subscription.mask, node: child)
        if !known.contains(wd) {
            known[wd] = KnownDirectory(listing: [], listedAfter: services.birthClock(), at: services.wallClock())
        }
        return true
    }

    /// A fanotify tree ends: its mark is let go of.
    func markedTreeEnded(_ subscription: Subscription) {
        guard let id = subscription.loop.markedFileSystem else { return }
        subscription.loop.markedFileSystem = nil
        marked.trees.removeAll { $0 === subscription }
        marked.snapshotQueue.removeAll { $0.subscription === subscription }
        marked.wanted = marked.trees.reduce(0) { $0 | $1.mask | EventMask.names }
        marked.backend.unmark(id)
    }

    // MARK: - Events

    /// One record read from the fanotify group, at `now`.
    func receive(_ event: MarkEvent, now: UInt64) {
        assert(services.isOnLoopThread())
        beginRead(now: now)
        if event.isOverflow {
            overflowed(marked: true)
            return
        }
        if event.isRename {
            routeRename(event)
            return
        }

        guard let wd = descriptor(resolving: event) else { return }
        if event.isAboutDirectoryItself {
            for mask in MarkEvent.directoryEvents(event.mask) {
                // Through inotify, the parent's watch reports what happens to a directory by its
                // name, before the directory's own watch does; fanotify has only the directory's
                // record, so the parent's is made from it (its end is a record of the parent's).
                if mask & EventMask.lifecycle == 0, let named = namedInParent(wd, mask: mask) { handle(named) }
                handle(BackendEvent(wd: wd, mask: mask))
            }
            return
        }
        // Only what a tree asked for, or must follow: a mark shared by trees that asked for more
        // reports it to all of them.
        let wanted = UInt64(marked.wanted) | MarkBits.onDirectory
        MarkEvent.forEachEntryEvent(event.mask & wanted, exists: { entryExists(event.name, in: wd) }) {
            mask in
            // A directory made in a tree is empty: no walk, since everything made in it comes as
            // its own event, in order. Its handle, in the record, names it.
            if mask & EventMask.create != 0 {
                // A rename held for its mirror has none: routed first, before the handle of the
                // directory this record creates is set.
                if held.isHolding { releaseHeldMove() }
                marked.creatingDirectory = event.object
            }
            handle(event.backendEvent(wd: wd, mask: mask))
            marked.creatingDirectory = nil
        }
    }

    /// The event `mask` of the tree directory numbered `wd`, as its parent's watch would report
    /// it by name; nil for a tree's root (no parent in the tree) or a directory no tree holds.
    private func namedInParent(_ wd: Int32, mask: UInt32) -> BackendEvent? {
        for watch in table.watches(wd) {
            guard let node = watch.node, let parent = node.parent else { continue }
            return BackendEvent(wd: parent.wd, mask: mask, name: node.name)
        }
        return nil
    }

    /// A rename, with both its names in one record: a paired move when both directories are in a
    /// tree, a move out or in when one is.
    private func routeRename(_ event: MarkEvent) {
        let directory = event.isDirectory ? EventMask.isDirectory : 0
        var source = descriptor(resolving: event)
        var target = descriptor(resolving: event, renamed: true)
        if held.isHolding, !continuesHeldRename(event, from: source, to: target) {
            // What was held comes first, and may bring in the directories this record names
            // (a tree moved in, then a directory of it moved on): they are resolved after it.
            releaseHeldMove()
            source = descriptor(resolving: event)
            target = descriptor(resolving: event, renamed: true)
        }
        if source == nil, event.isDirectory {
            // A directory that comes in from outside: what lies in it was outside too.
            marked.forgetOutside()
        }
        marked.cookie = marked.cookie == .max ? 1 : marked.cookie + 1
        switch (source, target) {
        case (let from?, let to?):
            marked.renamedObject = event.object
            defer { marked.renamedObject = nil }
            route(
                move: event.backendEvent(wd: from, mask: EventMask.movedFrom | directory, cookie: marked.cookie),
                to: event.backendEvent(
                    wd: to, mask: EventMask.movedTo | directory, cookie: marked.cookie, renamed: true))
        case (let from?, nil):
            route(event.backendEvent(wd: from, mask: EventMask.movedFrom | directory, cookie: marked.cookie))
        case (nil, let to?):
            route(
                event.backendEvent(
                    wd: to, mask: EventMask.movedTo | directory, cookie: marked.cookie, renamed: true)
            )
        case (nil, nil):
            break
        }
    }

    /// Whether a rename record is the second half of the exchange whose first half is held: the
    /// mirror of the held move, or the departure that follows a held arrival.
    private func continuesHeldRename(_ event: MarkEvent, from source: Int32?, to target: Int32?) -> Bool {
        let oldName = event.backendEvent(wd: 0, mask: 0).name
        let newName = event.backendEvent(wd: 0, mask: 0, renamed: true).name
        if let move = held.move {
            return source == move.to.wd && target == move.from.wd && oldName == move.to.name
                && newName == move.from.name
        }
        if let arrival = held.arrival { return source == arrival.wd && oldName == arrival.name }
        return false
    }

    /// The inode of `name` in the directory of `wd` now; nil when it is gone (or cannot be read).
    func entryInode(_ name: [UInt8], in wd: Int32) -> UInt64? {
        guard let path = table.watches(wd).first?.directory else { return nil }
        let status = try? inDirectory(path) { fd throws(SyscallError) in
            try table.system.entryStatus(in: fd, name: name)
        }
        return status?.inode
    }

    /// Whether `name` exists in the directory of `wd` now (a merged record's order, an exchange).
    func entryExists(_ name: [UInt8], in wd: Int32) -> Bool {
        guard let path = table.watches(wd).first?.directory else { return false }
        let status = try? inDirectory(path) { fd throws(SyscallError) in
            try table.system.entryStatus(in: fd, name: name)
        }
        return status != nil  // (try? flattens: nil for an error and for no such entry alike)
    }

    /// The handle of the directory at `path`, whatever its length.
    private func directoryHandle(_ path: FileSystemPath, fileSystemID id: [UInt8]) throws(SyscallError) -> KernelHandle
    {
        try inDirectory(path.parent) { fd throws(SyscallError) in
            try table.system.fileHandle(in: fd, name: Array(path.lastComponent.bytes), fileSystemID: id)
        }
    }

    /// Runs `body` with a descriptor (`O_PATH`) of the directory `path`, of any length (opened in
    /// steps past PATH_MAX).
    private func inDirectory<Result>(
        _ path: FileSystemPath, _ body: (Int32) throws(SyscallError) -> Result
    ) throws(SyscallError) -> Result {
        let fd = try table.system.openDirectoryReference(path, followingLinks: false)
        defer { table.system.close(fd) }
        return try body(fd)
    }

    /// The descriptor of the directory a record names (its new one, `renamed`), as
    /// ``descriptor(resolving:)-(KernelHandle)`` gives it; its handle is made only when it is not
    /// the last one a record named.
    private func descriptor(resolving event: MarkEvent, renamed: Bool = false) -> Int32? {
        if let last = marked.last(namedBy: event, renamed: renamed) { return last }
        guard let handle = renamed ? event.newDirectory : event.directory else { return nil }
        return descriptor(resolving: handle)
    }

    /// The descriptor of the directory `handle` names, resolved now if the table does not know
    /// it; nil when it is outside every tree (or gone).
    private func descriptor(resolving handle: KernelHandle) -> Int32? {
        if let wd = marked.descriptor(handle) { return wd }
        if marked.isOutside(handle) { return nil }
        guard let mountFD = marked.backend.mountFD(for: handle) else { return nil }
        let system = table.system
        guard let fd = try? system.open(handle, mountFD: mountFD) else { return nil }  // gone since
        defer { system.close(fd) }
        guard let path = try? system.symbolicLinkTarget(FileSystemPath("/proc/self/fd/\(fd)")) else { return nil }
        // Removed since the event (the kernel's path of an unlinked directory says so).
        if path.bytes.last == UInt8(ascii: ")"), path.description.hasSuffix(" (deleted)") { return nil }
        var found: Int32?
        var early = false
        for subscription in marked.trees where !subscription.loop.isEnded {
            guard subscription.loop.markedFileSystem.map({ $0[...] == handle.fileSystemID }) == true,
                MountTable.isPrefix(subscription.root.bytes, of: path.bytes)
            else { continue }
            if let wd = materialize(path, handle: handle, in: subscription, early: &early) { found = wd }
        }
        if found == nil && !early { marked.markOutside(handle) }
        return found
    }

    /// The node of the directory at `path` in `subscription`'s tree, made with the nodes of the
    /// directories above it that have none yet; `handle` is the directory's. Nil when the path
    /// is excluded, or a directory on the way is gone.
    ///
    /// `early` is set when the directory is not in the tree yet as far as its events have told:
    /// its parent was listed without it (or with a file by its name), so the event that brings
    /// it in (its creation, a move in, an exchange with that file) is still queued, behind the
    /// one being routed, and the walk that event starts reports what is in it. Events from
    /// before that are not reported on their own: they would be reported twice.
    @discardableResult
    func materialize(
        _ path: FileSystemPath, handle: KernelHandle, in subscription: Subscription, early: inout Bool
    ) -> Int32? {
        guard let tree = subscription.loop.tree, let id = subscription.loop.markedFileSystem else { return nil }
        let root = subscription.root.bytes
        guard path.bytes.count > root.count else { return tree.root.wd }
        let relative = path.bytes[(root.count == 1 ? 1 : root.count + 1)...]
        let names = relative.split(separator: UInt8(ascii: "/"))
        var node = tree.root
        for (index, name) in names.enumerated() {
            if let child = node.child(name) {
                node = child
                continue
            }
            // Not there as far as the events have told, or there as a file: the event that
            // brings it (an exchange with that file, too) is still to come.
            if let parent = known[node.wd], parent.holdsDirectory(name) != true {
                early = true
                return nil
            }
            let childPath = node.path.appending(bytes: name)
            // Below an excluded directory: never watched, as inotify's trees never walk in.
            if let exclusions = subscription.exclusions, exclusions.excludes(childPath, under: subscription.root) {
                return nil
            }
            let childHandle: KernelHandle
            if index == names.count - 1 {
                childHandle = handle
            } else {
                guard let found = try? directoryHandle(childPath, fileSystemID: id) else { return nil }
                childHandle = found
            }
            let wd = marked.descriptor(for: childHandle)
            if let existing = tree.node(wd) { return existing.wd }  // the same directory, by another name
            let child = tree.add(Array(name), of: node, wd: wd)
            table.insert(subscription, wd: wd, directory: childPath, mask: subscription.mask, node: child)
            node = child
        }
        return node.wd
    }

    // MARK: - Listing after readiness

    /// Lists fanotify trees' directories not listed yet, for a slice of the loop's time: each
    /// becomes a kept directory (what an overflow's rescan compares with), and its
    /// subdirectories nodes of the tree and the next to list.
    func continueSnapshots(for slice: UInt64 = Router.snapshotSlice) {
        let end = services.clock() + slice
        while let (subscription, node) = marked.snapshotQueue.popLast() {
            guard !subscription.loop.isEnded, let tree = subscription.loop.tree, tree.node(node.wd) === node,
                let id = subscription.loop.markedFileSystem
            else { continue }
            if known.contains(node.wd) {
                for child in node.children { marked.snapshotQueue.append((subscription, child)) }
            } else {
                list(node, of: tree, id: id, for: subscription)
            }
            if services.clock() >= end { break }
        }
    }

    /// After a rename inside a lazy tree: the directories its listing could not open are tried
    /// again, at their paths now.
    func retryUnlisted(in tree: WatchedTree, for subscription: Subscription) {
        guard !tree.unlisted.isEmpty else { return }
        for node in tree.unlisted where tree.node(node.wd) === node {
            marked.snapshotQueue.append((subscription, node))
        }
        tree.unlisted = []
    }

    /// Lists what the listing after readiness has not reached yet of `subscription`'s tree, now.
    func finishSnapshots(of subscription: Subscription) {
        while marked.snapshotQueue.contains(where: { $0.subscription === subscription }) {
            let mine = marked.snapshotQueue.filter { $0.subscription === subscription }
            marked.snapshotQueue.removeAll { $0.subscription === subscription }
            let others = marked.snapshotQueue
            marked.snapshotQueue = mine
            while !marked.snapshotQueue.isEmpty { continueSnapshots() }
            marked.snapshotQueue = others
        }
    }

    /// Lists one directory of a fanotify tree after readiness.
    private func list(_ node: TreeNode, of tree: WatchedTree, id: [UInt8], for subscription: Subscription) {
        let system = table.system
        let path = node.path
        let fd: Int32
        do {
            fd = try system.openDirectory(path, followingLinks: false)
        } catch {
            // Renamed since its parent was listed (or an ancestor exchanged with a file, ENOTDIR):
            // its path is right again after the rename's event (``retryUnlisted(in:for:)``).
            if error.errno == ENOENT || error.errno == ENOTDIR { tree.unlisted.append(node) }
            return
        }
        defer { system.close(fd) }
        let begun = services.birthClock()
        var listing: [(name: [UInt8], inode: UInt64, isDirectory: Bool)] = []
        do {
            try Snapshot.readNames(directory: fd, system: system) { name, inode, kind in
                listing.append((Array(name), inode, kind == .directory))
            }
        } catch {
            return  // gone, or unreadable: its parent's events, or a rescan, will say
        }
        let directory = KnownDirectory(listing: listing, listedAfter: begun, at: services.wallClock())
        // Read after the watcher was ready and reported to nobody: what it shows is still news.
        directory.suppressesRepeats = false
        known[node.wd] = directory
        expectListingEcho(node.wd)
        for entry in listing where entry.isDirectory {
            if let child = node.child(entry.name[...]) {
                marked.snapshotQueue.append((subscription, child))
                continue
            }
            let childPath = path.appending(bytes: entry.name[...])
            if let exclusions = subscription.exclusions, exclusions.excludes(childPath, under: subscription.root) {
                continue
            }
            guard let handle = try? system.fileHandle(in: fd, name: entry.name, fileSystemID: id) else { continue }
            let wd = marked.descriptor(for: handle)
            guard tree.node(wd) == nil else { continue }
            let child = tree.add(entry.name, of: node, wd: wd)
            child.inode = entry.inode
            table.insert(subscription, wd: wd, directory: childPath, mask: subscription.mask, node: child)
            marked.snapshotQueue.append((subscription, child))
        }
    }
}
