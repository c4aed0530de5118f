/// Decides when a settling watcher's batch is handed over (``DirectoryWatcher/Settling``): once
/// the watch has been quiet for the quiet period and no file in it is still open for writing by
/// a writer seen at work, or, whatever happens, once the first change has waited the maximum.
///
/// A writer is seen at work when a file is written (`IN_MODIFY`), or created and opened
/// (`IN_CREATE` then `IN_OPEN`: `open` with `O_CREAT`, which `cp` does long before its first
/// write is reported: one `copy_file_range` can copy hundreds of megabytes, and its `IN_MODIFY`
/// comes when it returns). It is seen done when that file is closed after writing
/// (`IN_CLOSE_WRITE`; a file created and opened, by any close), removed or moved out. A link, a
/// symbolic link or a fifo is created without being opened, so it holds nothing. inotify says
/// when a file is written and when a writer closes it, not who writes, so files are counted, not
/// writers: of two writers of one file, the first to close releases it (the quiet period still
/// holds the batch while the other keeps writing).
///
/// A version-control operation holds the batch too, while one of its locks exists in the watched
/// tree (``isVersionControlLock(_:)``: `.git/index.lock`, which a checkout, a merge, a rebase's
/// steps or a commit hold while they rewrite the work tree, then `HEAD.lock` and the branch's
/// lock as they move them, and Mercurial's): it is seen made, and done when it is removed or
/// renamed away (git renames each onto the file it replaces). So a checkout of
/// two thousand files, however long it pauses between them, is one batch, a quiet period after
/// it ends. Like a writer's, the hold ends at the maximum wait (a lock left behind by a crash
/// holds no batch beyond it).
///
/// Event-driven: ``deadline`` is nil while nothing is pending, so a settled watcher costs no
/// timer and no wake-up while its directory is idle. Pure: time comes in as `now` (nanoseconds of
/// any monotonic clock), so tests drive it by hand.
struct Settler {
    let quietPeriod: UInt64
    let maximumWait: UInt64
    /// The inotify bits of what the watcher reports: other changes only count as activity and
    /// follow writers.
    let reportedMask: UInt32

    /// What a settling watcher's kernel watch reports whatever it selected: entries coming and
    /// going (to follow them through the batch) and writes and closes (to follow writers).
    static let followedMask =
        EventMask.names | EventMask.modify | EventMask.closeWrite | EventMask.open | EventMask.closeNoWrite

    private var batch: SettledBatch
    /// Files written and not yet closed after writing, by path.
    private(set) var writers: Set<FileSystemPath> = []
    /// Files created and not yet opened (`created`), and created, opened and not yet closed
    /// (`opening`): a writer that has not written yet.
    private(set) var created: Set<FileSystemPath> = []
    private(set) var opening: Set<FileSystemPath> = []
    /// Version-control locks seen made and not yet gone (when ``waitsForVersionControl``).
    private(set) var locks: Set<FileSystemPath> = []
    private var firstChange: UInt64 = 0
    private var lastChange: UInt64 = 0

    /// Whether a write makes a writer that holds the batch until its close: not for a polled
    /// watcher, which sees no closes (a poll's write only says the file changed).
    let followsWriters: Bool
    /// Whether a version-control lock holds the batch.
    let waitsForVersionControl: Bool

    /// Mercurial's locks, as the ends of their paths. (git's are every `*.lock` in a `.git`
    /// directory: ``isVersionControlLock(_:)``.)
    static let mercurialLocks: [[UInt8]] = [Array("/.hg/wlock".utf8), Array("/.hg/store/lock".utf8)]

    init(
        quietPeriod: UInt64, maximumWait: UInt64, reportedMask: UInt32, listsRemovedContents: Bool = false,
        followsWriters: Bool = true, waitsForVersionControl: Bool = true
    ) {
        self.followsWriters = followsWriters
        self.waitsForVersionControl = waitsForVersionControl
        self.quietPeriod = quietPeriod
        self.maximumWait = max(maximumWait, quietPeriod)
        self.reportedMask = reportedMask
        self.batch = SettledBatch(listsRemovedContents: listsRemovedContents)
    }

    /// Nothing is waiting to be handed over.
    var isEmpty: Bool { batch.isEmpty }

    /// When the batch is due: after the quiet period since the last change when no writer is
    /// busy, and at the latest the maximum wait after the first. Nil while nothing waits.
    var deadline: UInt64? {
        guard !batch.isEmpty else { return nil }
        let latest = firstChange &+ maximumWait
        return writers.isEmpty && opening.isEmpty && locks.isEmpty ? min(lastChange &+ quietPeriod, latest) : latest
    }

    /// Takes in one change, at `now`. True when it starts a batch. Every change is folded in,
    /// reported or not (a rename the watcher does not report still moves the entry a reported
    /// write is about); what is not reported is left out when the batch is handed over.
    mutating func add(_ change: DirectoryChange, now: UInt64) -> Bool {
        follow(change)
        // Opens and closes of readers change nothing: followed, not counted, unless reported.
        if change.kind == .opened || change.kind == .readerClosed || change.kind == .accessed,
            !Self.isReportable(change.kind, reportedMask)
        {
            return false
        }
        lastChange = now
        let wasEmpty = batch.isEmpty
        batch.add(change)
        guard wasEmpty, !batch.isEmpty else { return false }
        firstChange = now
        return true
    }

    /// The batch when it is due at `now` (or `force`d: the watch ends), changes the watcher does
    /// not report left out; nil when it is not due.
    mutating func take(now: UInt64, force: Bool = false) -> [DirectoryChange]? {
        guard let deadline, force || now >= deadline else { return nil }
        // Handed over with a writer still at work: the maximum wait is reached. A writer that
        // goes on holds the next batch again from its next write; one whose close was never
        // seen (written through another name) holds no batch beyond this one.
        if !force {
            writers = []
            opening = []
            locks = []
        }
        created = []
        let mask = reportedMask
        return batch.take().filter { ChangeTranslation.selects(mask, $0.kind) && Self.isReportable($0.kind, mask) }
    }

    /// The watcher stops following its entries for a while (it paused): a writer's close would
    /// go unseen, and hold the next batch to the maximum wait.
    mutating func forgetWriters() {
        writers = []
        opening = []
        created = []
        locks = []
    }

    /// Whether `path` is a version-control lock: a file named `*.lock` anywhere in a `.git`
    /// directory (git takes one for each file it replaces: `index.lock` while a checkout, a merge
    /// or a commit rewrites the work tree, then `HEAD.lock` and a branch's `refs/heads/NAME.lock`
    /// to move them), or Mercurial's `.hg/wlock` and `.hg/store/lock`.
    static func isVersionControlLock(_ path: FileSystemPath) -> Bool {
        let bytes = path.bytes
        if mercurialLocks.contains(where: { bytes.count > $0.count && bytes.reversed().starts(with: $0.reversed()) }) {
            return true
        }
        let suffix = Array(".lock".utf8)
        guard bytes.count > suffix.count, bytes.reversed().starts(with: suffix.reversed()) else { return false }
        let name = path.lastComponent.bytes
        guard name.count > suffix.count else { return false }
        let git = Array("/.git/".utf8)
        let directory = bytes[..<(bytes.count - name.count)]
        guard directory.count >= git.count else { return false }
        return (0...(directory.count - git.count)).contains { offset in
            directory[(directory.startIndex + offset)...].starts(with: git)
        }
    }

    private mutating func follow(_ change: DirectoryChange) {
        switch change.kind {
        case .created where !change.isDirectory:
            created.insert(change.path)
            if waitsForVersionControl && Self.isVersionControlLock(change.path) { locks.insert(change.path) }
        case .opened:
            if created.remove(change.path) != nil { opening.insert(change.path) }
        case .modified where !change.isDirectory && !change.foundByRescan && followsWriters:
            // (A modification a rescan found says that the file changed while events were lost,
            // not that a writer is at work.)
            writers.insert(change.path)
        case .writerClosed:
            writers.remove(change.path)
            opening.remove(change.path)
        case .readerClosed:
            opening.remove(change.path)
        case .removed, .movedOut:
            for set in [\Settler.writers, \.created, \.opening, \.locks] { self[keyPath: set].remove(change.path) }
            if change.isDirectory {
                for set in [\Settler.writers, \.created, \.opening, \.locks] {
                    self[keyPath: set] = self[keyPath: set].filter { !$0.isBelow(change.path) }
                }
            }
        case .renamed:
            guard let old = change.oldPath else { return }
            // A lock renamed away (onto the index) is done.
            locks = locks.filter { $0 != old && !$0.isBelow(old) }
            for set in [\Settler.writers, \.created, \.opening] {
                if self[keyPath: set].remove(old) != nil { self[keyPath: set].insert(change.path) }
                if change.isDirectory {
                    self[keyPath: set] = Set(
                        self[keyPath: set].map { $0.isBelow(old) ? $0.replacingPrefix(old, with: change.path) : $0 })
                }
            }
        case .exchanged:
            guard let other = change.oldPath else { return }
            for set in [\Settler.writers, \.created, \.opening] {
                self[keyPath: set] = Set(
                    self[keyPath: set].map {
                        if $0 == other || $0.isBelow(other) { return $0.replacingPrefix(other, with: change.path) }
                        if $0 == change.path || $0.isBelow(change.path) {
                            return $0.replacingPrefix(change.path, with: other)
                        }
                        return $0
                    })
            }
        case .overflow, .rootRemoved, .rootMoved:
            // Closes may be among the events lost: a writer left on record would hold every
            // batch to the maximum.
            writers = []
            created = []
            opening = []
            locks = []
        default:
            break
        }
    }

    /// The kinds `selects` passes whatever the mask (opens, reads, closes), checked here.
    private static func isReportable(_ kind: DirectoryChange.Kind, _ mask: UInt32) -> Bool {
        switch kind {
        case .opened: return mask & EventMask.open != 0
        case .accessed: return mask & EventMask.access != 0
        case .writerClosed: return mask & EventMask.closeWrite != 0
        case .readerClosed: return mask & EventMask.closeNoWrite != 0
        default: return true
        }
    }
}
