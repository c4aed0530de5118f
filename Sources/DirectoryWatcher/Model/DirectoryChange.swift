/// One change in a watched directory.
///
/// A change names the entry it is about by its absolute path (the watched directory's absolute
/// path joined with the entry's name), says what happened to it, and whether it is a directory.
public struct DirectoryChange: Hashable, Sendable, CustomStringConvertible {
    /// What happened.
    public enum Kind: String, Hashable, Sendable, CaseIterable {
        /// A file, directory or other entry was created in the directory (`IN_CREATE`).
        case created
        /// An entry was removed from the directory (`IN_DELETE`).
        case removed
        /// A file's contents were written (`IN_MODIFY`). A burst of writes to one file between two
        /// reads of the kernel queue arrives as one change.
        case modified
        /// Permissions, owner, timestamps, extended attributes or link count changed (`IN_ATTRIB`).
        /// With an empty name, the watched directory's own attributes changed.
        case attributesChanged
        /// An entry was renamed within what this watcher watches; ``DirectoryChange/oldPath``
        /// holds its previous path. One change, never a removal plus a creation: the kernel's
        /// `IN_MOVED_FROM` and `IN_MOVED_TO` are paired through their cookie.
        case renamed
        /// Two entries of what this watcher watches exchanged their names at once
        /// (`renameat2(2)` with `RENAME_EXCHANGE`, as `mv --exchange` does): the entry that was at
        /// ``DirectoryChange/oldPath`` is now at ``DirectoryChange/path``, and the one that was at
        /// `path` is now at `oldPath`. ``DirectoryChange/isDirectory`` is about the entry now at
        /// `path`. One change for both, where two renames applied in order would lose a name. See
        /// Watching a tree for how the kernel's events are told apart from two renames.
        case exchanged
        /// An entry was moved into the directory from a place this watcher does not watch. When
        /// another watcher of this process watches the place it came from,
        /// ``DirectoryChange/oldPath`` says where that was.
        case movedIn
        /// An entry was moved out of the directory to a place this watcher does not watch.
        case movedOut
        /// The watched directory itself was removed (or its file system unmounted). The watcher
        /// stops itself after delivering this change. For a file watch, ``DirectoryChange/path``
        /// is the file's directory.
        case rootRemoved
        /// The watched directory itself was renamed or moved. The watcher stops itself after
        /// delivering this change: its path no longer names the directory. For a file watch,
        /// ``DirectoryChange/path`` is the file's directory.
        case rootMoved
        /// The kernel's event queue overflowed (`IN_Q_OVERFLOW`), or the watcher's callbacks (an
        /// async sequence's consumer) fell too far behind, and ``DirectoryChange/droppedChanges``
        /// says how many changes were held back: changes may have been lost. ``DirectoryChange/path``
        /// is the watched directory. With exact recovery (the default), the changes found by listing the
        /// directory again follow, marked ``DirectoryChange/foundByRescan``; a ``failed`` change
        /// says when that listing failed, and what was missed there is then unknown. With
        /// ``DirectoryWatcher/Recovery/notice``, list the directory again to catch up. See Lost
        /// changes and rescans.
        case overflow
        /// A directory of what this watcher watches could not be watched or listed, and
        /// ``DirectoryChange/error`` says why: permission denied on a subdirectory of a tree,
        /// the watch limit reached, a rescan that could not list a directory, a mount a fanotify
        /// tree does not see into. ``DirectoryChange/path`` is that directory. Nothing was lost
        /// from the kernel's queue (that is ``overflow``), but what happens in that directory is
        /// not reported until the cause goes: the watcher goes on watching the rest, and tries
        /// the directory again where it can (a subdirectory whose permissions change, the next
        /// rescan). Never excluded, never folded into another change.
        case failed
        /// A file or directory was opened (`IN_OPEN`). Reported only when selected with
        /// ``DirectoryWatcher/Events/opened``. With the watched directory's own path, the
        /// directory itself was opened (listed, for one).
        case opened
        /// A file's contents were read (`IN_ACCESS`). Reported only when selected with
        /// ``DirectoryWatcher/Events/accessed``. A burst of reads of one file between two reads of
        /// the kernel queue arrives as one change.
        case accessed
        /// A file that was open for writing was closed (`IN_CLOSE_WRITE`): that writer has
        /// finished, so what it wrote is complete, though another writer may still be busy. Also
        /// reported when nothing was written (`touch`). Reported only when selected with
        /// ``DirectoryWatcher/Events/writerClosed``.
        case writerClosed
        /// A file or directory that was open without write access was closed
        /// (`IN_CLOSE_NOWRITE`). Reported only when selected with
        /// ``DirectoryWatcher/Events/readerClosed``.
        case readerClosed
    }

    public var kind: Kind
    // Four stored fields in three words: Swift passes such a value in registers, where the
    // wider one before (eight fields, 40 bytes) was built in memory and copied at each hand-over,
    // a copy and a destroy per change in the router alone (callgrind). Beside `kind`, to share
    // its word: the four flags.
    private var flags: UInt8
    /// The entry's absolute path.
    public var path: FileSystemPath
    /// For ``Kind/renamed``, the entry's previous absolute path; for ``Kind/exchanged``, the other
    /// entry's path. For ``Kind/movedIn``, where the
    /// entry came from when another watcher of this process watches that directory. Nil otherwise.
    public var oldPath: FileSystemPath? {
        get { extra?.oldPath }
        set { extra = Extra.of(oldPath: newValue, error: error, droppedChanges: droppedChanges) }
    }
    /// Whether the entry is a directory, as the kernel reported it (`IN_ISDIR`).
    public var isDirectory: Bool {
        get { flags & Flags.isDirectory != 0 }
        set { set(Flags.isDirectory, newValue) }
    }
    /// True for a change found by listing the directory again after the kernel dropped events
    /// (it follows an ``Kind/overflow`` notice), rather than reported by the kernel itself. See
    /// Lost changes and rescans.
    public var foundByRescan: Bool {
        get { flags & Flags.foundByRescan != 0 }
        set { set(Flags.foundByRescan, newValue) }
    }
    /// True for a change made while the watcher was paused (``DirectoryWatcher/pause()``), found
    /// on ``DirectoryWatcher/resume()`` by comparing what the watcher had been told of its
    /// directories with a fresh listing of the ones that had changed. Such changes come in one
    /// batch, the first after resuming. See <doc:StartingStoppingAndPausing>.
    public var whilePaused: Bool {
        get { flags & Flags.whilePaused != 0 }
        set { set(Flags.whilePaused, newValue) }
    }
    /// True for a change made while nothing watched: found when a watcher started from a saved
    /// state (``DirectoryWatcher/Options/savedState``) by comparing the state with a fresh
    /// listing. Such changes come in one batch, the first after the watcher starts. See
    /// <doc:SavedState>.
    public var whileStopped: Bool {
        get { flags & Flags.whileStopped != 0 }
        set { set(Flags.whileStopped, newValue) }
    }
    /// For a ``Kind/failed`` change: why its directory could not be watched or listed
    /// (permission denied, out of descriptors, the watch limit), with the directory's path
    /// (``DirectoryWatcherError/path``). Nil for every other kind.
    public var error: DirectoryWatcherError? {
        get { extra?.error }
        set { extra = Extra.of(oldPath: oldPath, error: newValue, droppedChanges: droppedChanges) }
    }
    /// For an ``Kind/overflow`` notice that says the watcher's own callbacks (or an async
    /// sequence's consumer) fell too far behind: how many changes were dropped while it caught
    /// up. With exact recovery what they did is reported next, found by listing the directories
    /// again (``foundByRescan``). Nil for the kernel's own overflow, whose count nobody knows.
    public var droppedChanges: Int? {
        get { extra?.droppedChanges }
        set { extra = Extra.of(oldPath: oldPath, error: error, droppedChanges: newValue) }
    }

    /// What is almost always nil (the old path of a rename, an error, a count), out of line.
    private var extra: Extra?

    private enum Flags {
        static let isDirectory: UInt8 = 1
        static let foundByRescan: UInt8 = 2
        static let whilePaused: UInt8 = 4
        static let whileStopped: UInt8 = 8
    }

    private mutating func set(_ flag: UInt8, _ on: Bool) {
        flags = on ? flags | flag : flags & ~flag
    }

    public init(
        kind: Kind, path: FileSystemPath, oldPath: FileSystemPath? = nil, isDirectory: Bool,
        foundByRescan: Bool = false, whilePaused: Bool = false, whileStopped: Bool = false,
        error: DirectoryWatcherError? = nil, droppedChanges: Int? = nil
    ) {
        self.kind = kind
        self.path = path
        flags =
            (isDirectory ? Flags.isDirectory : 0) | (foundByRescan ? Flags.foundByRescan : 0)
            | (whilePaused ? Flags.whilePaused : 0) | (whileStopped ? Flags.whileStopped : 0)
        extra = Extra.of(oldPath: oldPath, error: error, droppedChanges: droppedChanges)
    }

    public var description: String {
        let suffix = isDirectory ? "/" : ""
        var origin =
            whileStopped
            ? " (while stopped)" : whilePaused ? " (while paused)" : foundByRescan ? " (found by rescan)" : ""
        if let droppedChanges { origin += " (\(droppedChanges) changes dropped)" }
        if let error { origin += ": \(error.reason)" }
        if let oldPath { return "\(kind.rawValue) \(oldPath)\(suffix) -> \(path)\(suffix)\(origin)" }
        return "\(kind.rawValue) \(path)\(suffix)\(origin)"
    }
}

extension DirectoryChange {
    /// A boxed ``DirectoryChange/oldPath``, ``DirectoryChange/error`` and
    /// ``DirectoryChange/droppedChanges``, compared and hashed by value; none when all three
    /// are nil, so that equal changes have equal fields.
    private final class Extra: Hashable, Sendable {
        let oldPath: FileSystemPath?
        let error: DirectoryWatcherError?
        let droppedChanges: Int?

        private init(oldPath: FileSystemPath?, error: DirectoryWatcherError?, droppedChanges: Int?) {
            self.oldPath = oldPath
            self.error = error
            self.droppedChanges = droppedChanges
        }

        static func of(oldPath: FileSystemPath?, error: DirectoryWatcherError?, droppedChanges: Int?) -> Extra? {
            oldPath == nil && error == nil && droppedChanges == nil
                ? nil : Extra(oldPath: oldPath, error: error, droppedChanges: droppedChanges)
        }

        static func == (a: Extra, b: Extra) -> Bool {
            a.oldPath == b.oldPath && a.error == b.error && a.droppedChanges == b.droppedChanges
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(oldPath)
            hasher.combine(error)
            hasher.combine(droppedChanges)
        }
    }
}
