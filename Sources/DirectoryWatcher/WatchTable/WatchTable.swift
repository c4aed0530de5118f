/// Which subscribers each kernel watch descriptor serves. Loop thread only.
///
/// The kernel gives one watch descriptor per inode and instance: a second `inotify_add_watch` on
/// the same directory returns the same descriptor. So each descriptor keeps its subscribers, the
/// kernel mask is the union of what they asked for (added with `IN_MASK_ADD`), and the kernel
/// watch is removed only when the last subscriber leaves.
///
/// The kernel mask is never narrowed while the descriptor lives: narrowing means calling
/// `inotify_add_watch` on the path again, and by then the path may name another inode. Each
/// subscriber filters the events it did not ask for instead.
struct WatchTable<Subscriber: AnyObject> {
    struct Watch {
        let subscriber: Subscriber
        private let givenDirectory: FileSystemPath
        var mask: UInt32
        /// For a file watch: the one entry name this subscriber wants, and the path it knows that
        /// entry by. Nil for a directory watch, which wants every entry.
        var entry: WatchedEntry? = nil
        /// For a directory of a recursive watcher's tree: where it is in the tree.
        let node: TreeNode?

        init(subscriber: Subscriber, directory: FileSystemPath, mask: UInt32, entry: WatchedEntry?, node: TreeNode?) {
            self.subscriber = subscriber
            self.givenDirectory = directory
            self.mask = mask
            self.entry = entry
            self.node = node
        }

        /// The path this subscriber knows the directory by (two subscribers may reach one inode
        /// through different paths, a symbolic link for one); in a tree, its path now.
        var directory: FileSystemPath { node?.path ?? givenDirectory }

        /// Whether an event about `name` (empty: the directory itself) concerns this watch.
        func covers(_ name: ArraySlice<UInt8>) -> Bool {
            guard let entry else { return true }
            return name == entry.name[...]
        }

        /// The path a change about `name` carries for this subscriber.
        func path(of name: ArraySlice<UInt8>) -> FileSystemPath {
            if let entry, name == entry.name[...] { return entry.path }
            return directory.appending(bytes: name)
        }
    }

    struct Entry {
        var watches: [Watch]
        var kernelMask: UInt32
    }

    private var entries = ByDescriptor<Entry>()
    let inotifyFD: Int32
    let system: System

    init(inotifyFD: Int32, system: System) {
        self.inotifyFD = inotifyFD
        self.system = system
    }

    /// Watches `directory` for `subscriber`, joining the kernel watch when one exists.
    /// `flags` are kernel-only bits (`IN_ONLYDIR`, `IN_EXCL_UNLINK`) that do not become events.
    /// `only` narrows the subscriber's interest to one entry of the directory (a file watch).
    /// `node` gives, for the descriptor the kernel returned, the directory's place in the
    /// subscriber's tree (a recursive watcher).
    @discardableResult
    mutating func add(
        _ subscriber: Subscriber, directory: FileSystemPath, mask: UInt32, flags: UInt32 = 0,
        only: WatchedEntry? = nil, node: (Int32) -> TreeNode? = { _ in nil }
    ) throws(SyscallError) -> Int32 {
        let wd = try kernelWatch(directory, mask: mask, flags: flags)
        insert(subscriber, wd: wd, directory: directory, mask: mask, only: only, node: node(wd))
        return wd
    }

    /// The kernel half of ``add(_:directory:mask:flags:only:node:)``: the system call alone,
    /// which touches no state of the table, so a tree's walk can make it from several threads
    /// and ``insert(_:wd:directory:mask:only:node:)`` the descriptors afterwards, on the loop.
    /// A path too long for `inotify_add_watch` (past PATH_MAX) is watched through a descriptor
    /// opened in steps.
    func kernelWatch(_ directory: FileSystemPath, mask: UInt32, flags: UInt32) throws(SyscallError) -> Int32 {
        if System.isTooLong(directory) {
            let fd = try system.openDirectoryReference(
                directory, followingLinks: flags & InotifyMask.dontFollow == 0)
            defer { system.close(fd) }
            return try kernelWatch(openDirectory: fd, mask: mask, flags: flags)
        }
        return try system.inotifyAddWatch(inotifyFD, path: directory, mask: mask | flags | InotifyMask.maskAdd)
    }

    /// Adds (or extends) the kernel watch of the directory open as `directory`, whatever its
    /// path names by now: the watch is then on exactly the directory that is listed through the
    /// same descriptor, even when it is renamed between the two. (Through `/proc/self/fd`, a link
    /// the kernel follows to the open directory itself.)
    func kernelWatch(openDirectory directory: Int32, mask: UInt32, flags: UInt32) throws(SyscallError) -> Int32 {
        try system.inotifyAddWatch(
            inotifyFD, path: FileSystemPath("/proc/self/fd/\(directory)"),
            mask: mask | (flags & ~InotifyMask.dontFollow) | InotifyMask.maskAdd)
    }

    /// The table's half of ``add(_:directory:mask:flags:only:node:)``, for a descriptor that
    /// ``kernelWatch(_:mask:flags:)`` returned.
    mutating func insert(
        _ subscriber: Subscriber, wd: Int32, directory: FileSystemPath, mask: UInt32, only: WatchedEntry? = nil,
        node: TreeNode?
    ) {
        let watch = Watch(subscriber: subscriber, directory: directory, mask: mask, entry: only, node: node)
        if var entry = entries[wd] {
            entry.kernelMask |= mask
            if let index = entry.watches.firstIndex(where: { $0.subscriber === subscriber }) {
                entry.watches[index].mask |= mask
            } else {
                entry.watches.append(watch)
            }
            entries[wd] = entry
        } else {
            entries[wd] = Entry(watches: [watch], kernelMask: mask)
        }
    }

    /// Removes `subscriber` from `wd`; removes the kernel watch when no subscriber is left.
    mutating func remove(_ subscriber: Subscriber, from wd: Int32) {
        guard var entry = entries[wd] else { return }
        entry.watches.removeAll { $0.subscriber === subscriber }
        if entry.watches.isEmpty {
            entries[wd] = nil
            // EINVAL here means the kernel dropped the watch already (the directory is gone and its
            // IN_IGNORED is still queued): nothing is left to remove. A fanotify directory has no
            // kernel watch of its own.
            if !FanotifyMarks.isFanotify(wd) { try? system.inotifyRemoveWatch(inotifyFD, wd) }
        } else {
            entries[wd] = entry
        }
    }

    /// The kernel dropped `wd` (`IN_IGNORED`): forgets it and returns the watches it served.
    mutating func kernelDropped(_ wd: Int32) -> [Watch] {
        entries.removeValue(forKey: wd)?.watches ?? []
    }

    /// The watches `wd` serves; empty for a descriptor that is gone (events still queued for a
    /// watch removed a moment ago, or the overflow event's -1).
    func watches(_ wd: Int32) -> [Watch] {
        entries[wd]?.watches ?? []
    }

    /// The mask the kernel watch `wd` was asked for: the union of its subscribers' masks.
    func kernelMask(_ wd: Int32) -> UInt32? {
        entries[wd]?.kernelMask
    }

    var count: Int { entries.count }
}

/// The one entry a file watch follows in its directory.
struct WatchedEntry: Equatable, Sendable {
    /// The entry's name in the watched directory.
    let name: [UInt8]
    /// The path changes about the entry carry: the path the caller gave, made absolute.
    let path: FileSystemPath
}
