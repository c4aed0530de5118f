/// Which subscribers each directory a backend watches serves, by the descriptor the backend
/// numbered it with. Loop thread only.
///
/// A backend gives one descriptor per directory (``DirectoryWatchBackend``): watching it again
/// returns the same descriptor. So each descriptor keeps its subscribers, the backend's mask is
/// the union of what they asked for, and the backend's watch is let go only when the last
/// subscriber leaves.
///
/// The backend's mask is never narrowed while the descriptor lives: narrowing means watching the
/// path again, and by then the path may name another directory. Each subscriber filters the
/// events it did not ask for instead.
struct WatchTable<Subscriber: AnyObject> {
    struct Watch {
        /// The fields, in one object shared by every copy: the router copies each watch of a
        /// directory out of the table for every event there, and a copy was a retain and a release
        /// of each of its references (the subscriber, the path, the entry's two, the node). The
        /// object's fields are constants, which a reader borrows without a copy; a watch changed
        /// gets an object of its own.
        private var fields: Fields

        private final class Fields {
            let subscriber: Subscriber
            let givenDirectory: FileSystemPath
            let mask: UInt32
            let entry: WatchedEntry?
            let node: TreeNode?

            init(
                subscriber: Subscriber, givenDirectory: FileSystemPath, mask: UInt32, entry: WatchedEntry?,
                node: TreeNode?
            ) {
                self.subscriber = subscriber
                self.givenDirectory = givenDirectory
                self.mask = mask
                self.entry = entry
                self.node = node
            }
        }

        var subscriber: Subscriber { fields.subscriber }
        private var givenDirectory: FileSystemPath { fields.givenDirectory }
        var mask: UInt32 {
            get { fields.mask }
            set {
                fields = Fields(
                    subscriber: fields.subscriber, givenDirectory: fields.givenDirectory, mask: newValue,
                    entry: fields.entry, node: fields.node)
            }
        }
        /// For a file watch: the one entry name this subscriber wants, and the path it knows that
        /// entry by. Nil for a directory watch, which wants every entry.
        var entry: WatchedEntry? { fields.entry }
        /// For a directory of a recursive watcher's tree: where it is in the tree.
        var node: TreeNode? { fields.node }

        init(subscriber: Subscriber, directory: FileSystemPath, mask: UInt32, entry: WatchedEntry?, node: TreeNode?) {
            // A tree's directory goes by its node's path, which follows renames: a path of its
            // own here would be a second copy of it for every directory of the tree.
            fields = Fields(
                subscriber: subscriber, givenDirectory: node == nil ? directory : FileSystemPath(bytes: []),
                mask: mask, entry: entry, node: node)
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
    /// What watches the directories, one at a time.
    let backend: any DirectoryWatchBackend
    /// The system calls the router looks at the disk through (listings, an entry's status).
    let system: System

    init(backend: any DirectoryWatchBackend, system: System) {
        self.backend = backend
        self.system = system
    }

    /// Watches `directory` for `subscriber`, joining the backend's watch when one exists.
    /// `also` are bits the backend is asked for beyond the subscriber's (a kept snapshot's
    /// changes of name), which do not reach the subscriber. `only` narrows the subscriber's
    /// interest to one entry of the directory (a file watch). `node` gives, for the descriptor
    /// the backend returned, the directory's place in the subscriber's tree (a recursive watcher).
    @discardableResult
    mutating func add(
        _ subscriber: Subscriber, directory: FileSystemPath, mask: UInt32, also: UInt32 = 0,
        only: WatchedEntry? = nil, node: (Int32) -> TreeNode? = { _ in nil }
    ) throws(SyscallError) -> Int32 {
        let wd = try backend.watch(directory, events: mask | also, followingLinks: true)
        insert(subscriber, wd: wd, directory: directory, mask: mask, only: only, node: node(wd))
        return wd
    }

    /// The table's half of ``add(_:directory:mask:also:only:node:)``, for a descriptor the backend
    /// returned to a caller that watched the directory itself (a tree's walk, on several threads).
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

    /// Removes `subscriber` from `wd`. True when no subscriber is left: the caller then lets the
    /// backend's watch go (the table does not know which backend numbered it).
    @discardableResult
    mutating func remove(_ subscriber: Subscriber, from wd: Int32) -> Bool {
        guard var entry = entries[wd] else { return false }
        entry.watches.removeAll { $0.subscriber === subscriber }
        if entry.watches.isEmpty {
            entries[wd] = nil
            return true
        }
        entries[wd] = entry
        return false
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
