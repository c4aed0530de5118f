extension DirectoryWatcher {
    /// How a watcher watches: which changes it reports, and where its callbacks run.
    ///
    /// ```swift
    /// // Only new and removed entries:
    /// let options = DirectoryWatcher.Options(events: [.created, .removed])
    /// // The defaults, plus closes after writing (a writer finished with a file):
    /// let settled = DirectoryWatcher.Options(events: DirectoryWatcher.Events.default.union(.writerClosed))
    /// ```
    ///
    /// The default value reports what ``DirectoryWatcher/watchFolder(path:options:delegate:queue:)`` reports.
    public struct Options: Hashable, Sendable {
        /// Which changes the watcher reports. ``DirectoryChange/Kind/rootRemoved``,
        /// ``DirectoryChange/Kind/rootMoved`` and ``DirectoryChange/Kind/overflow`` are always
        /// reported: they end the watch or say that changes were lost.
        public var events: Events

        /// Where callbacks run; ``Delivery/automatic`` unless told otherwise.
        public var delivery: Delivery

        /// What the watcher does when the kernel drops events; ``Recovery/exact`` unless told
        /// otherwise.
        public var recovery: Recovery

        /// Whether every directory below the watched one is watched too, as it is and as it
        /// changes; false unless told otherwise. Changes carry their full path. A directory that
        /// appears (created, moved in) is watched before it is listed, and what the listing finds
        /// is reported as created, so nothing made in it is missed; a directory renamed inside the
        /// tree is one ``DirectoryChange/Kind/renamed`` change, and later changes below it carry
        /// the new path; one moved out or removed is let go. Symbolic links are not followed. A
        /// recursive watcher always keeps what it knows of each directory (its names), so its
        /// recovery is ``Recovery/exact`` whatever ``recovery`` says. Ignored by the file forms
        /// (`watchFile`). See <doc:WatchingATree>.
        public var recursive: Bool

        /// Globs (fnmatch(3)) for entries to leave out: an entry is excluded when its name, or
        /// its path below the watched directory, matches one, so `.git`, `node_modules`,
        /// `*.tmp` and `build/*` do what they look like. No change about an excluded entry is
        /// reported (a rename only when both its names are excluded), and in a recursive watch
        /// an excluded directory is never watched or listed: it costs no kernel watch and no
        /// events. Empty unless told otherwise.
        public var excludes: [String]

        /// Whether what git ignores is left out, as the repository's ignore files say: the
        /// `.gitignore` files of the watched directory, of those below it and of those above it
        /// up to the top of its work tree, the repository's `.git/info/exclude` and the user's
        /// global excludes file (`core.excludesFile`), read as git reads them (nested files,
        /// `!`, a trailing `/`, anchored patterns, `**`). An ignored directory of a tree is never
        /// watched or listed; no change about an ignored entry is reported. A `.gitignore` that
        /// changes while watching is read again: what it no longer ignores is reported as moved
        /// in (a directory watched and what it holds reported), what it now ignores as moved out
        /// (a directory let go). The `.git` directory itself is not ignored by git's rules: add
        /// it to ``excludes`` to leave it out. A tree is then watched through inotify. False
        /// unless told otherwise. See <doc:WatchingATree>.
        public var gitignore: Bool

        /// In a recursive watch, whether a symbolic link to a directory is followed and the
        /// directory it leads to watched as part of the tree (changes in it carry the link's
        /// path); false unless told otherwise, so that a link can neither make a loop nor pull in
        /// a tree from elsewhere. Followed, a directory reached twice (a loop, or two links to
        /// one place) is watched once, where it was reached first: the kernel gives one watch per
        /// directory (device and inode).
        public var followsSymbolicLinks: Bool

        /// Whether changes are held until the writing is over and handed over as one settled
        /// batch (see ``Settling`` and <doc:Settling>); nil unless told otherwise: each batch is
        /// delivered as soon as the kernel queue has been read, as the sample's callbacks were.
        public var settling: Settling?

        /// How changes are seen: through inotify, fanotify or by polling; ``Backend/automatic``
        /// unless told otherwise, which polls where inotify cannot see (network and host-shared
        /// file systems), and watches a tree through fanotify where the process may. See
        /// <doc:RemoteAndVirtualFileSystems> and <doc:WatchingATree>.
        public var backend: Backend

        /// For a polled watcher, the longest wait between two polls: one second unless told
        /// otherwise. After a poll that found changes the next comes after a quarter of it; each
        /// quiet poll doubles the wait again, up to this. More than zero.
        public var pollingInterval: Duration

        /// A file that keeps what the watcher has been told, so that a watcher started again
        /// (after a restart, a crash, a reboot) first reports exactly what changed while nothing
        /// watched, then goes on live; nil unless told otherwise. See ``SavedState`` and
        /// <doc:SavedState>.
        public var savedState: SavedState?

        public init(
            events: Events = .default, delivery: Delivery = .automatic, recovery: Recovery = .exact,
            recursive: Bool = false, excludes: [String] = [], gitignore: Bool = false,
            followsSymbolicLinks: Bool = false,
            settling: Settling? = nil, backend: Backend = .automatic, pollingInterval: Duration = .seconds(1),
            savedState: SavedState? = nil
        ) {
            self.savedState = savedState
            self.backend = backend
            self.pollingInterval = pollingInterval
            self.settling = settling
            self.events = events
            self.delivery = delivery
            self.recovery = recovery
            self.recursive = recursive
            self.excludes = excludes
            self.gitignore = gitignore
            self.followsSymbolicLinks = followsSymbolicLinks
        }
    }

    /// A saved state: what a watcher has been told of its directories, kept in a file so that the
    /// next watcher of the same directory (in this process or the next) starts from it.
    ///
    /// ```swift
    /// let state = DirectoryWatcher.SavedState(path: "/var/lib/indexer/uploads.state")
    /// let options = DirectoryWatcher.Options(recursive: true, savedState: state)
    /// let watcher = try DirectoryWatcher.watchFolder(path: "/srv/uploads", options: options) { changes in
    ///     for change in changes { indexChange(change) }  // first, what changed since the last run
    /// }
    /// // After handling a batch, from anywhere: nothing handled so far is reported again.
    /// try watcher.saveState()
    /// ```
    ///
    /// A watcher started with a state file that exists first delivers one batch: what changed
    /// since the state was saved (entries created, removed, renamed, followed by inode, and
    /// written, by size and modification time to the nanosecond; in a tree, directories made with
    /// their entries), each change marked ``DirectoryChange/whileStopped``; then live changes,
    /// none missing and none repeated between the two. With no file there, it reports nothing of
    /// the past and saves its first state at once, so that a crash right after the start loses
    /// nothing either.
    ///
    /// The state is saved when ``DirectoryWatcher/saveState()`` is called, every ``interval``,
    /// and when the watch stops; each save holds exactly the changes delivered so far, and is
    /// written atomically (a new file, `fsync`, `rename`, the folder synced), so a crash leaves
    /// the last save whole. After a crash, the next start reports everything since the last save
    /// (and what became of each path delivered since, which a journal beside the file keeps):
    /// some changes again, none missing.
    public struct SavedState: Hashable, Sendable {
        /// What a watcher does with a state file it cannot start from (not a state, another
        /// version, truncated, corrupt, another directory's).
        public enum WhenUnusable: Hashable, Sendable {
            /// Starting throws ``DirectoryWatcherError/Code/savedStateUnusable``, naming the
            /// file and the cause; the file is left as it is.
            case refuse
            /// The watcher starts as if from an empty state: one
            /// ``DirectoryChange/Kind/failed`` notice naming the file and the cause, then every
            /// entry as ``DirectoryChange/Kind/created`` (marked
            /// ``DirectoryChange/whileStopped``); the file is replaced at the first save.
            case startFresh
        }

        /// The state file, absolute or relative to the current directory when the watcher is
        /// made. Its folder must exist. Inside the watched directory, the file (and the
        /// temporary file each save writes beside it, and its journal, `FILE.journal`) is left
        /// out of what is reported.
        public var path: String
        /// ``WhenUnusable/refuse`` unless told otherwise.
        public var whenUnusable: WhenUnusable
        /// How often the state is saved while watching; nil, the default, saves only when asked
        /// and when the watch stops. More than zero.
        public var interval: Duration?

        public init(path: String, whenUnusable: WhenUnusable = .refuse, interval: Duration? = nil) {
            self.path = path
            self.whenUnusable = whenUnusable
            self.interval = interval
        }
    }

    /// Settled batches: a watcher is told once the writing is over, not while it goes on.
    ///
    /// With settling, a watcher's changes wait until its directory (or tree) has been quiet for
    /// ``quietPeriod`` and no file in it is still open for writing by a writer the watcher saw
    /// at work (a file written, `IN_MODIFY`, and not yet closed, `IN_CLOSE_WRITE`); then they
    /// are handed over as one batch that says what they add up to: created then written is one
    /// ``DirectoryChange/Kind/created``, created then removed is nothing, a rename chain a to b
    /// to c is one rename a to c, and so on (<doc:Settling> lists the rules). A writer that never
    /// stops still produces a batch once the first change has waited ``maximumWait``.
    ///
    /// Nothing polls: no timer runs while nothing waits, and the directory is never listed for
    /// it.
    ///
    /// ```swift
    /// // Told about a file once it has been copied in, not while it is being written:
    /// let options = DirectoryWatcher.Options(settling: .init(quietPeriod: .milliseconds(300)))
    /// let watcher = try DirectoryWatcher.watchFolder(path: "Inbox", options: options) { changes in
    ///     for change in changes where change.kind == .created { process(change.path) }
    /// }
    /// ```
    public struct Settling: Hashable, Sendable {
        /// How long the watch must have been quiet (no change at all, reported or not) before
        /// a batch is handed over. More than zero.
        public var quietPeriod: Duration

        /// How long the first change of a batch waits at most, however busy the directory and
        /// whatever writer is still at work: ten seconds, or four times ``quietPeriod`` when that
        /// is longer, unless told otherwise. At least ``quietPeriod``.
        public var maximumWait: Duration

        /// Whether a directory removed with its contents is reported as the removal of each
        /// entry below it too; false unless told otherwise: one removal, of the directory. (Its
        /// entries are reported only by a recursive watch, which sees them go.)
        public var listsRemovedContents: Bool

        /// Whether a write that leaves a file's bytes as they were is dropped; false unless told
        /// otherwise. With it, each file the watcher sees created or written is read when its
        /// batch is handed over (after the writer's close), and a digest of its bytes is kept; a
        /// later ``DirectoryChange/Kind/modified`` of that file whose bytes have the same digest
        /// is not reported (an editor's or a build's rewrite of the same bytes). The first write
        /// of a file never seen written is reported: nothing says what it held before. Files over
        /// 64 MiB are not read, and always reported. See <doc:Settling#Writes-that-change-nothing>.
        public var comparesContent: Bool

        /// Whether a version-control operation in a watched tree holds the batch until it is
        /// over; true unless told otherwise. While a lock of git's (`.git/index.lock` during a
        /// checkout, a merge, a rebase's step, a commit; any `*.lock` in `.git`) or Mercurial's
        /// (`.hg/wlock`) exists, having been seen made in the tree, the batch waits, as it waits
        /// for a writer: it is handed over a quiet period
        /// after the lock is gone, as one batch, or at ``maximumWait``. The repository's
        /// `.git` must be in the watched tree and not excluded. See
        /// <doc:Settling#Version-control-operations>.
        public var waitsForVersionControl: Bool

        /// - Parameters:
        ///   - quietPeriod: How long the watch must be quiet; more than zero.
        ///   - maximumWait: The longest a change waits; nil for ten seconds, or four times the
        ///     quiet period when that is longer. At least `quietPeriod`.
        ///   - listsRemovedContents: Whether a removed directory's entries are listed too.
        ///   - comparesContent: Whether a write that leaves a file's bytes as they were is dropped.
        ///   - waitsForVersionControl: Whether a version-control operation holds the batch.
        public init(
            quietPeriod: Duration, maximumWait: Duration? = nil, listsRemovedContents: Bool = false,
            comparesContent: Bool = false, waitsForVersionControl: Bool = true
        ) {
            self.waitsForVersionControl = waitsForVersionControl
            self.quietPeriod = quietPeriod
            self.maximumWait = maximumWait ?? max(.seconds(10), quietPeriod * 4)
            self.listsRemovedContents = listsRemovedContents
            self.comparesContent = comparesContent
        }

        /// Why these values cannot be used, or nil.
        var problem: String? {
            if quietPeriod <= .zero { return "the settling quiet period must be more than zero, not \(quietPeriod)" }
            if maximumWait < quietPeriod {
                return "the settling maximum wait (\(maximumWait)) must be at least the quiet period (\(quietPeriod))"
            }
            return nil
        }
    }

    /// How a watcher sees changes (``Options/backend``).
    public enum Backend: Hashable, Sendable {
        /// The default: inotify, unless the directory is on a file system whose changes inotify
        /// cannot see (NFS, SMB and CIFS, 9p, Ceph, AFS, Coda, NCP, OCFS2, and FUSE file systems
        /// other than those known to be local), which is polled; and for a recursive watcher,
        /// fanotify where it can be used (``fanotify``), inotify where not. The choice, and why,
        /// is in ``DirectoryWatcher/backendChoice``.
        case automatic
        /// inotify, whatever the file system.
        case inotify
        /// For a recursive watcher: fanotify, one mark for the tree's whole file system, ready at
        /// once whatever the tree's size and using no inotify watch. Needs `CAP_SYS_ADMIN`, a
        /// file system that gives file handles, no mount inside the tree, and symbolic links not
        /// followed; when one is missing the watcher fails to start with
        /// ``DirectoryWatcherError/Code/backendUnavailable``, saying which. A watcher of one
        /// directory or file uses inotify. See <doc:WatchingATree>.
        case fanotify
        /// Polling every ``Options/pollingInterval`` at most: the directory is listed and compared
        /// with its last listing. Sees changes made by other machines; costs a `statx` per entry
        /// per poll, and reports a change up to an interval late.
        case polling
    }

    /// The backend a watcher uses, and why (``DirectoryWatcher/backendChoice``).
    public struct BackendChoice: Hashable, Sendable, CustomStringConvertible {
        public enum Kind: Hashable, Sendable {
            case inotify
            case polling
            /// One fanotify mark for the tree's file system (``Backend/fanotify``).
            case fanotify
        }

        public let kind: Kind
        /// For polling, the longest wait between two polls; nil for inotify.
        public let interval: Duration?
        /// The file system's type, as the kernel names it (`ext4`, `nfs`) or, for FUSE, as the
        /// mount does (`fuse.sshfs`); its magic number in hex when unknown; nil when it was not
        /// asked for (a backend forced by the caller).
        public let fileSystem: String?
        /// Why, in words: `"/mnt/share is on nfs, whose changes made elsewhere inotify does not see"`.
        public let reason: String
        /// What the watcher cannot see, when that matters: on procfs, sysfs and the cgroup file
        /// systems, the kernel's own changes raise no event, and no listing shows them either.
        public let warning: String?

        public var description: String {
            let how: String
            switch kind {
            case .inotify: how = "inotify"
            case .fanotify: how = "fanotify"
            case .polling: how = "polling" + (interval.map { " every \($0.secondsText) s" } ?? "")
            }
            return "\(how): \(reason)" + (warning.map { "; warning: \($0)" } ?? "")
        }
    }

    /// Where a watcher's callbacks run.
    ///
    /// Whatever the delivery, one watcher's callbacks never overlap and come in the kernel's order.
    public enum Delivery: Hashable, Sendable {
        /// The default. Without a `queue`, on the library's own threads: the thread that read the
        /// change calls the delegate at once, with no hand-off to another thread, and a second
        /// thread stands by. When a callback runs longer than about 10 ms (it blocks, or waits for
        /// something), the standby takes over reading the kernel queue, so other watchers' changes
        /// keep coming and the kernel queue does not overflow; the slow watcher's later changes
        /// wait for it and follow in order. The library then has one thread per callback blocked
        /// at that moment, plus two; the extra threads end when the callbacks return (see
        /// Architecture.md, "Delivery"). Callbacks may block, wait for other watchers' callbacks,
        /// and call any method of any watcher.
        ///
        /// With a `queue`, on a serial queue that targets it, as ``queue`` does.
        case automatic

        /// On a serial Dispatch queue: a private one, or one that targets the `queue` given to
        /// `watchFolder`. Each batch is handed from the loop's thread to the queue, which costs a
        /// wake-up of another thread per batch (see Docs/benchmarks.md), and Dispatch may start a
        /// thread for each queue busy at once. The default of the first releases.
        case queue

        /// On the event-loop thread, as soon as the kernel's queue has been read, with no standby:
        /// while a callback runs, the loop reads nobody's changes; the kernel keeps queueing them,
        /// up to `fs.inotify.max_queued_events`, after which it reports an
        /// ``DirectoryChange/Kind/overflow``. So callbacks must be short and must never block or
        /// wait for another watcher's callbacks. They may call any method of any watcher,
        /// including `invalidate()` and `watchFolder`; barrier completions run there too. For
        /// processes that must not have a second thread. With a `queue` too, the watcher is refused
        /// (``DirectoryWatcherError/Code-swift.struct/invalidOption``): the two say different things.
        case eventLoopThread
    }

    /// What a watcher does when the kernel's queue overflows and events are lost.
    public enum Recovery: Hashable, Sendable {
        /// The default: the library keeps what it knows of the directory (one entry per name,
        /// read when watching starts) and, after an overflow, lists the directory again and
        /// reports exactly what changed meanwhile, each change marked
        /// ``DirectoryChange/foundByRescan``, after the ``DirectoryChange/Kind/overflow`` notice.
        /// Costs the listing when watching starts, and memory per entry (Docs/benchmarks.md).
        case exact

        /// Only the ``DirectoryChange/Kind/overflow`` notice: the watcher lists the directory
        /// again itself. For huge directories where memory matters more than exactness.
        case notice
    }

    /// Which kinds of change a watcher reports.
    ///
    /// The kernel watch of a directory serves every watcher of it with the union of what they
    /// asked for; each watcher then receives only the kinds it selected, so a watcher that selects
    /// few kinds costs the others nothing.
    public struct Events: OptionSet, Hashable, Sendable {
        public let rawValue: UInt32

        public init(rawValue: UInt32) {
            self.rawValue = rawValue
        }

        /// ``DirectoryChange/Kind/created`` (`IN_CREATE`).
        public static let created = Events(rawValue: 1 << 0)
        /// ``DirectoryChange/Kind/removed`` (`IN_DELETE`).
        public static let removed = Events(rawValue: 1 << 1)
        /// ``DirectoryChange/Kind/modified`` (`IN_MODIFY`).
        public static let modified = Events(rawValue: 1 << 2)
        /// ``DirectoryChange/Kind/attributesChanged`` (`IN_ATTRIB`).
        public static let attributesChanged = Events(rawValue: 1 << 3)
        /// ``DirectoryChange/Kind/renamed``, ``DirectoryChange/Kind/movedIn`` and
        /// ``DirectoryChange/Kind/movedOut`` (`IN_MOVED_FROM`, `IN_MOVED_TO`).
        public static let moved = Events(rawValue: 1 << 4)
        /// ``DirectoryChange/Kind/opened`` (`IN_OPEN`). Off by default: every open reports, reads
        /// included.
        public static let opened = Events(rawValue: 1 << 5)
        /// ``DirectoryChange/Kind/accessed`` (`IN_ACCESS`). Off by default: every read reports.
        public static let accessed = Events(rawValue: 1 << 6)
        /// ``DirectoryChange/Kind/writerClosed`` (`IN_CLOSE_WRITE`). Off by default.
        public static let writerClosed = Events(rawValue: 1 << 7)
        /// ``DirectoryChange/Kind/readerClosed`` (`IN_CLOSE_NOWRITE`). Off by default.
        public static let readerClosed = Events(rawValue: 1 << 8)

        /// What a watcher reports unless told otherwise: entries created, removed, written,
        /// changed in their attributes, renamed and moved.
        public static let `default`: Events = [.created, .removed, .modified, .attributesChanged, .moved]

        /// Everything, opens, reads and closes included.
        public static let all: Events = [
            .default, .opened, .accessed, .writerClosed, .readerClosed,
        ]

        /// The inotify bits these events need; the watch's own removal and move always come along.
        var eventMask: UInt32 {
            var mask = EventMask.lifecycle
            if contains(.created) { mask |= EventMask.create }
            if contains(.removed) { mask |= EventMask.delete }
            if contains(.modified) { mask |= EventMask.modify }
            if contains(.attributesChanged) { mask |= EventMask.attributes }
            if contains(.moved) { mask |= EventMask.movedFrom | EventMask.movedTo }
            if contains(.opened) { mask |= EventMask.open }
            if contains(.accessed) { mask |= EventMask.access }
            if contains(.writerClosed) { mask |= EventMask.closeWrite }
            if contains(.readerClosed) { mask |= EventMask.closeNoWrite }
            return mask
        }
    }
}
