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
        /// The fields every directory of a subscriber shares, in one object shared by every copy:
        /// the router copies each watch of a directory out of the table for every event there,
        /// and a copy was a retain and a release of each of its references (the subscriber, the
        /// path, the entry's two). The object's fields are constants, which a reader borrows
        /// without a copy; a watch changed gets an object of its own. A tree's directories share
        /// their subscriber's: an object each was a sixth of a tree's memory per directory.
        fileprivate var fields: Fields
        /// For a directory of a recursive watcher's tree: where it is in the tree.
        let node: TreeNode?

        fileprivate final class Fields {
            let subscriber: Subscriber
            let givenDirectory: FileSystemPath
            let mask: UInt32
            let entry: WatchedEntry?

            init(subscriber: Subscriber, givenDirectory: FileSystemPath, mask: UInt32, entry: WatchedEntry?) {
                self.subscriber = subscriber
                self.givenDirectory = givenDirectory
                self.mask = mask
                self.entry = entry
            }
        }

        var subscriber: Subscriber { fields.subscriber }
        private var givenDirectory: FileSystemPath { fields.givenDirectory }
        var mask: UInt32 {
            get { fields.mask }
            set {
                guard newValue != fields.mask else { return }
                fields = Fields(
                    subscriber: fields.subscriber, givenDirectory: fields.givenDirectory, mask: newValue,
                    entry: fields.entry)
            }
        }
        /// For a file watch: the one entry name this subscriber wants, and the path it knows that
        /// entry by. Nil for a directory watch, which wants every entry.
        var entry: WatchedEntry? { fields.entry }

        init(subscriber: Subscriber, directory: FileSystemPath, mask: UInt32, entry: WatchedEntry?, node: TreeNode?) {
            // A tree's directory goes by its node's path, which follows renames: a path of its
            // own here would be a second copy of it for every directory of the tree.
            fields = Fields(
                subscriber: subscriber, givenDirectory: node == nil ? directory : FileSystemPath(bytes: []),
                mask: mask, entry: entry)
            self.node = node
        }

        /// A tree's directory, sharing `fields` (another directory's of the same subscriber).
        fileprivate init(sharing fields: Fields, node: TreeNode) {
            self.fields = fields
            self.node = node
        }

        /// Whether this watch and `other` share their fields (for tests: a tree's memory).
        func sharesFields(with other: Watch) -> Bool { fields === other.fields }

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

    /// The watches of one directory. Nearly every directory has one, kept inline: an array for
    /// it was an allocation per directory of a tree. An enum rather than a watch and an array
    /// beside it: its case lives in the watch's spare bits, so a table entry takes 24 bytes, not
    /// 32 (a tree has one for each of its directories).
    enum Watches: RandomAccessCollection, MutableCollection {
        case one(Watch)
        /// None, or more than one.
        case many([Watch])

        init() { self = .many([]) }

        fileprivate init(_ watch: Watch) { self = .one(watch) }

        var startIndex: Int { 0 }
        var endIndex: Int {
            switch self {
            case .one: 1
            case .many(let watches): watches.count
            }
        }

        subscript(position: Int) -> Watch {
            get {
                switch self {
                case .one(let watch):
                    precondition(position == 0, "index out of range")
                    return watch
                case .many(let watches): return watches[position]
                }
            }
            set {
                switch self {
                case .one:
                    precondition(position == 0, "index out of range")
                    self = .one(newValue)
                case .many(var watches):
                    self = .many([])  // keeps the array unique: changed in place, not copied
                    watches[position] = newValue
                    self = .many(watches)
                }
            }
        }

        fileprivate mutating func append(_ watch: Watch) {
            switch self {
            case .one(let first): self = .many([first, watch])
            case .many(var watches):
                if watches.isEmpty {
                    self = .one(watch)
                } else {
                    self = .many([])
                    watches.append(watch)
                    self = .many(watches)
                }
            }
        }

        fileprivate mutating func removeAll(where shouldRemove: (Watch) -> Bool) {
            var kept = Watches()
            for watch in self where !shouldRemove(watch) { kept.append(watch) }
            self = kept
        }
    }

    /// A descriptor's watches: 16 bytes, a table slot of each directory of a tree. (The kernel
    /// watch's mask, the union of the watches', is worked out when asked, which is rare:
    /// ``kernelMask(_:)``.)
    struct Entry {
        var watches: Watches
    }

    private var entries = ByDescriptor<Entry>()
    /// What the kernel watch of a descriptor still reports for subscribers that left it while
    /// others stayed (its mask is never narrowed): bits no remaining watch asked for. Few
    /// descriptors, only while shared, forgotten with the descriptor.
    private var leftBits: [Int32: UInt32] = [:]
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
        let watch =
            node.flatMap { node in
                sharedFields(of: subscriber, mask: mask, near: node).map { Watch(sharing: $0, node: node) }
            } ?? Watch(subscriber: subscriber, directory: directory, mask: mask, entry: only, node: node)
        if var entry = entries[wd] {
            if let index = entry.watches.firstIndex(where: { $0.subscriber === subscriber }) {
                entry.watches[index].mask |= mask
            } else {
                entry.watches.append(watch)
            }
            entries[wd] = entry
        } else {
            entries[wd] = Entry(watches: Watches(watch))
        }
    }

    /// The fields of `subscriber`'s watch of the directory above `node` (or, for a tree's root,
    /// of a directory below it), when they can serve `node`'s too.
    private func sharedFields(of subscriber: Subscriber, mask: UInt32, near node: TreeNode) -> Watch.Fields? {
        guard let neighbour = node.parent ?? node.children.any,
            let watch = entries[neighbour.wd]?.watches.first(where: { $0.subscriber === subscriber && $0.node != nil }),
            watch.mask == mask, watch.entry == nil
        else { return nil }
        return watch.fields
    }

    /// Removes `subscriber` from `wd`. True when no subscriber is left: the caller then lets the
    /// backend's watch go (the table does not know which backend numbered it).
    @discardableResult
    mutating func remove(_ subscriber: Subscriber, from wd: Int32) -> Bool {
        guard var entry = entries[wd] else { return false }
        let before = Self.union(of: entry.watches)
        entry.watches.removeAll { $0.subscriber === subscriber }
        if entry.watches.isEmpty {
            entries[wd] = nil
            leftBits[wd] = nil
            return true
        }
        let left = before & ~Self.union(of: entry.watches)
        if left != 0 { leftBits[wd, default: 0] |= left }
        entries[wd] = entry
        return false
    }

    /// The kernel dropped `wd` (`IN_IGNORED`): forgets it and returns the watches it served.
    mutating func kernelDropped(_ wd: Int32) -> Watches {
        leftBits[wd] = nil
        return entries.removeValue(forKey: wd)?.watches ?? Watches()
    }

    /// The watches `wd` serves; empty for a descriptor that is gone (events still queued for a
    /// watch removed a moment ago, or the overflow event's -1).
    func watches(_ wd: Int32) -> Watches {
        entries[wd]?.watches ?? Watches()
    }

    /// The mask the kernel watch `wd` was asked for: the union of the masks of its subscribers,
    /// those that left it included.
    func kernelMask(_ wd: Int32) -> UInt32? {
        guard let entry = entries[wd] else { return nil }
        return Self.union(of: entry.watches) | (leftBits[wd] ?? 0)
    }

    private static func union(of watches: Watches) -> UInt32 {
        watches.reduce(0) { $0 | $1.mask }
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
