/// A watched directory as its watchers have been told it is: the snapshot read when watching
/// started (or at the last rescan), kept up to date from the events as they pass, with no system
/// call per event.
///
/// An entry an event created, wrote or changed is kept as ``Unsure``: reading its status would
/// cost a `statx` per event. It keeps its inode when one was known; for entries that events
/// created, the router learns inodes from a bare listing of names when the loop is idle
/// (``learnInodes(_:at:)``). A rescan (``differences(to:)``) then follows each file by its inode
/// where it has one and by its name where not, and reports a modification when the file was
/// written after what the watchers were told of it: after its birth, for an entry only its
/// creation was reported of; after the moment the last event about it was read, for the others.
///
/// The events also tell which changes a watcher has been told already: after a rescan has reported
/// an entry as created, the kernel's own `IN_CREATE` for it may still be queued; it finds the name
/// known and is not reported again (``apply(_:at:)``).
final class KnownDirectory {
    enum Known: Equatable {
        /// The status read at the last listing, unchanged by any event since.
        case entry(Snapshot.Entry)
        /// An entry whose status changed (or was never read) since the last listing.
        case unsure(Unsure)
    }

    /// What is known of an entry whose status changed since the last listing.
    struct Unsure: Equatable {
        var isDirectory: Bool
        /// The wall-clock time its last event was read.
        var since: Snapshot.Time
        /// That event was its creation: only its creation has been reported.
        var createdOnly: Bool
        /// Its inode, when known (kept from its last status, or learnt by
        /// ``learnInodes(_:listedAfter:)``); 0 when not. A file found under another name with
        /// this inode and born no later than ``bornBy`` is this file: at the moment the inode was
        /// read, no other file had it.
        var inode: UInt64 = 0
        var bornBy = Snapshot.Time.unvouched
        /// Its inode was read by a listing (a tree's, which reads no status), as the watchers
        /// know the entry, rather than learnt after an event: a learnt inode is the one at the
        /// name when it was learnt, which may be an entry whose move there is still to be read.
        var isListed = false

        /// Whether a rescan follows the file by its inode rather than by its name.
        var isFollowedByInode: Bool { inode != 0 && bornBy != .unvouched }
    }

    // The loop's leader alone touches a kept directory (the router checks it is on that thread),
    // so the runtime's exclusivity checks on every event would only cost time (three accesses
    // per created entry).
    @exclusivity(unchecked) private(set) var entries: NameTable<Known>

    init(_ snapshot: Snapshot) {
        entries = Self.entries(of: snapshot)
    }

    /// A directory known from entries already in a table (a listing compared as it was read).
    init(entries: NameTable<Known>) {
        self.entries = entries
    }

    /// A directory known from a listing of names, inodes and types (a tree's directories: no
    /// status per entry). `start` is the birth clock read before the listing began, which vouches
    /// for the inodes as ``learnInodes(listedAfter:from:)`` explains; `now` is when the listing
    /// was read: a file written later is reported modified by a rescan.
    init(
        listing: [(name: [UInt8], inode: UInt64, isDirectory: Bool)], listedAfter start: Snapshot.Time,
        at now: Snapshot.Time
    ) {
        entries = NameTable(minimumCapacity: listing.count, nameBytes: listing.reduce(0) { $0 + $1.name.count })
        let bornBy = start.justBefore
        for entry in listing {
            entries.updateValue(
                .unsure(
                    Unsure(
                        isDirectory: entry.isDirectory, since: now, createdOnly: false, inode: entry.inode,
                        bornBy: bornBy, isListed: true)), forName: entry.name[...])
        }
    }

    /// The entries of the directory at `path` as a listing reads them, in its order, with no
    /// table of names of their own on the way: a saved state keeps that order, and the listing of
    /// the next start from it finds each name where it expects it.
    static func listedEntries(_ path: FileSystemPath, system: System) throws(SyscallError) -> NameTable<Known> {
        var entries = NameTable<Known>()
        try Snapshot.visitEntriesOnEveryCore(
            path, system: system,
            expecting: { count, bytes in entries = NameTable(minimumCapacity: count, nameBytes: bytes) }
        ) { name, status in
            entries.updateValue(.entry(status), forName: name)
        }
        return entries
    }

    static func entries(of snapshot: Snapshot) -> NameTable<Known> {
        var entries = NameTable<Known>(
            minimumCapacity: snapshot.entries.count, nameBytes: snapshot.entries.keys.reduce(0) { $0 + $1.count })
        for (name, entry) in snapshot.entries { entries.updateValue(.entry(entry), forName: name[...]) }
        return entries
    }

    /// Entries created or moved here by an event have no inode on record yet: without it, one
    /// renamed while events are lost cannot be told from a removal and a creation. The router
    /// then lists the names again (``learnInodes(_:at:)``) when the loop has a moment.
    @exclusivity(unchecked) private(set) var lacksInodes = false
    /// The router has put this directory on its list of directories to learn inodes for.
    var isDueForLearning = false
    /// Whether an event that repeats what the listing shows is a repeat (``apply(_:at:)``
    /// returns false). Not for a listing read after watching began and reported to nobody (a
    /// fanotify tree's directories, listed after it is ready): the events it shows are news,
    /// even those read after it. A rescan, which reports what it found, sets it again.
    var suppressesRepeats = true

    /// Empty, with nothing pending: as good as any other empty directory with the same
    /// ``suppressesRepeats`` (``KnownDirectories`` keeps such a one as a shared object).
    var isPristine: Bool { entries.isEmpty && !lacksInodes && !isDueForLearning }

    /// Asks the processor for where a lookup of `name` starts (``NameTable/prefetch(_:)``).
    func prefetch(_ name: ArraySlice<UInt8>) {
        entries.prefetch(name)
    }

    /// Applies an event about `name` (not half of a paired rename: see ``renamed(from:to:at:)``).
    /// Returns false when the event repeats what the watchers have been told already (an entry
    /// created that is known, one removed that is not), so it is not reported again.
    func apply(_ event: BackendEvent, at now: Snapshot.Time) -> Bool {
        let isDirectory = event.has(EventMask.isDirectory)
        if event.has(EventMask.create) {
            // A name cannot be created while it exists: the rescan reported this one already.
            // (One hash for the common case; a repeat puts back what it replaced.)
            let created = Known.unsure(Unsure(isDirectory: isDirectory, since: now, createdOnly: true))
            guard var known = entries.updateValue(created, forName: event.name) else {
                lacksInodes = true
                return true
            }
            // Listed, and created after the watch began: born during the listing, maybe in the
            // tick its inode was vouched for by. Listed again to be sure.
            if case .unsure(var unsure) = known, unsure.inode != 0 {
                unsure.bornBy = .unvouched
                known = .unsure(unsure)
                lacksInodes = true
            }
            entries.updateValue(known, forName: event.name)
            return false
        }
        if event.has(EventMask.movedTo) {
            // A rename may replace an entry: always news.
            entries.updateValue(
                .unsure(Unsure(isDirectory: isDirectory, since: now, createdOnly: false)), forName: event.name)
            lacksInodes = true
            return true
        }
        if event.has(EventMask.delete | EventMask.movedFrom) {
            return entries.removeValue(forName: event.name) != nil
        }
        if event.has(EventMask.modify | EventMask.attributes | EventMask.closeWrite),
            let record = entries.record(forName: event.name)
        {
            entries[record: record] = .unsure(Self.unsure(entries[record: record], since: now))
        }
        return true
    }

    /// What is known of an entry after an event changed it: the same file, status unknown.
    private static func unsure(_ known: Known, since now: Snapshot.Time) -> Unsure {
        switch known {
        case .entry(let entry):
            return Unsure(
                isDirectory: entry.kind == .directory, since: now, createdOnly: false, inode: entry.inode,
                bornBy: entry.born ?? now, isListed: true)
        case .unsure(var unsure):
            unsure.since = now
            unsure.createdOnly = false
            return unsure
        }
    }

    /// A rename within the directory: the entry keeps what is known of it under its new name.
    func renamed(from: ArraySlice<UInt8>, to: ArraySlice<UInt8>, isDirectory: Bool, at now: Snapshot.Time) {
        let known = entries.removeValue(forName: from)
        putIn(to, known, isDirectory: isDirectory, at: now)
    }

    /// Two entries exchanged names (`RENAME_EXCHANGE`): each keeps what is known of it.
    func exchange(_ first: ArraySlice<UInt8>, _ second: ArraySlice<UInt8>) {
        let one = entries.removeValue(forName: first)
        let other = entries.removeValue(forName: second)
        if let one { entries.updateValue(one, forName: second) }
        if let other { entries.updateValue(other, forName: first) }
    }

    /// The inode of `name` as a listing read it (a snapshot's status, or a tree's listing, which
    /// reads no status), kept through the events that changed the entry since (a rename keeps
    /// it); nil when no listing read it (an inode learnt after an event does not count).
    func listedInode(_ name: ArraySlice<UInt8>) -> UInt64? {
        guard let record = entries.record(forName: name) else { return nil }
        switch entries[record: record] {
        case .entry(let entry): return entry.inode
        case .unsure(let unsure): return unsure.isListed && unsure.inode != 0 ? unsure.inode : nil
        }
    }

    /// The inode of `name` when one was read for it (by a listing, or learnt since); nil otherwise.
    func inode(_ name: ArraySlice<UInt8>) -> UInt64? {
        guard let record = entries.record(forName: name) else { return nil }
        switch entries[record: record] {
        case .entry(let entry): return entry.inode
        case .unsure(let unsure): return unsure.inode == 0 ? nil : unsure.inode
        }
    }

    /// The subdirectory `name` is the directory of `inode` (a tree's node for it has it), born
    /// no later than `bornBy`: a rescan follows it by that inode, so that the name found holding
    /// another directory is not taken for the same one.
    func vouch(_ name: ArraySlice<UInt8>, directoryInode inode: UInt64, bornBy: Snapshot.Time = .certain) {
        guard inode != 0, let record = entries.record(forName: name),
            case .unsure(var unsure) = entries[record: record],
            unsure.isDirectory, !unsure.isFollowedByInode
        else { return }
        unsure.inode = inode
        unsure.bornBy = bornBy
        entries[record: record] = .unsure(unsure)
    }

    /// Whether an entry of that name is known.
    func contains(_ name: ArraySlice<UInt8>) -> Bool {
        entries.record(forName: name) != nil
    }

    /// Whether the entry of that name is known as a directory; nil when none is known.
    func holdsDirectory(_ name: ArraySlice<UInt8>) -> Bool? {
        entries.record(forName: name).map { entries[record: $0].isDirectory }
    }

    /// Takes out an entry that moved to another watched directory.
    func takeOut(_ name: ArraySlice<UInt8>) -> Known? {
        entries.removeValue(forName: name)
    }

    /// Puts in an entry that moved here from another watched directory.
    func putIn(_ name: ArraySlice<UInt8>, _ known: Known?, isDirectory: Bool, at now: Snapshot.Time) {
        if let known {
            entries.updateValue(known, forName: name)
        } else {
            entries.updateValue(
                .unsure(Unsure(isDirectory: isDirectory, since: now, createdOnly: false)), forName: name)
            lacksInodes = true
        }
    }

    /// The names whose inodes are not on record (those ``learnInodes(listedAfter:from:)`` would
    /// take from a listing), when there are at most `limit` of them; nil when there are more.
    func namesLackingInodes(atMost limit: Int) -> [[UInt8]]? {
        // Counted first, by value alone: when there are too many (a burst of new files, which a
        // listing then reads), no name is copied.
        guard entries.count(where: Self.lacksInode, upTo: limit) <= limit else { return nil }
        var names: [[UInt8]] = []
        entries.forEach { name, known in
            if Self.lacksInode(known) { names.append(Array(name)) }
        }
        return names
    }

    private static func lacksInode(_ known: Known) -> Bool {
        guard case .unsure(let unsure) = known else { return false }
        return !unsure.isFollowedByInode
    }

    /// Records the inodes a listing of the directory's names gave (`getdents64`, no status per
    /// entry), for the entries that had none. `start` is the birth clock
    /// (``System/coarseWallClockNow()``) read before the listing began: a file born later is
    /// stamped no earlier than `start`, so a file found later with one of these inodes and born
    /// before `start` is the file listed (no other file had that inode while it lived).
    ///
    /// An entry whose event was read at or after `start` may have been born in the clock's
    /// current tick, where that reasoning cannot tell two files apart: it stays lacking
    /// (``lacksInodes``), to be listed again a moment later.
    func learnInodes(
        listedAfter start: Snapshot.Time,
        from list: (_ visit: (ArraySlice<UInt8>, UInt64) -> Void) throws(SyscallError) -> Void
    ) throws(SyscallError) {
        // Whatever happens, this listing is the last try until an event adds an entry: a
        // directory that cannot be listed is not retried on every idle moment.
        lacksInodes = false
        let bornBy = start.justBefore
        var stillLacking = false
        defer { lacksInodes = stillLacking }
        // The table is the listing's alone while it runs: each name is then looked up and
        // updated in place, with no retain of the table's storage for every name listed.
        var table = NameTable<Known>()
        swap(&table, &entries)
        defer { swap(&table, &entries) }
        try list { name, inode in
            table.modifyValue(forName: name) { known in
                guard case .unsure(var unsure) = known, !unsure.isFollowedByInode else {
                    return
                }
                unsure.inode = inode
                unsure.isListed = false
                if unsure.since.isAfter(bornBy) {
                    unsure.bornBy = .unvouched
                    stillLacking = true
                } else {
                    unsure.bornBy = bornBy
                }
                known = .unsure(unsure)
            }
        }
    }

    /// The changes from what is known to `current`, by name, in an order that applies. An entry
    /// whose inode is known is followed by it (renamed when found under another name); one known
    /// by name only is taken to be the same file if the name is still there, and removed if not.
    /// Either is reported modified when it was written after what the watchers were told of it.
    func differences(to current: Snapshot, directories: [[UInt8]: UInt64] = [:]) -> [Snapshot.Difference] {
        var known = entries.dictionary()
        // Subdirectories whose inode is certain (a tree's nodes, each checked by the rescan):
        // followed by it, so that a name that holds another directory since is not taken for the
        // same one.
        for (name, inode) in directories where inode != 0 {
            guard case .unsure(var unsure) = known[name], unsure.isDirectory else { continue }
            unsure.inode = inode
            unsure.bornBy = .certain
            known[name] = .unsure(unsure)
        }
        return Snapshot.differences(from: known, to: current)
    }

    /// After a rescan: what is known is what was listed.
    func reset(to snapshot: Snapshot) {
        suppressesRepeats = true
        entries = Self.entries(of: snapshot)
        lacksInodes = false
    }
}

extension KnownDirectory.Known: KnownEntry {
    var isDirectory: Bool {
        switch self {
        case .entry(let entry): return entry.kind == .directory
        case .unsure(let unsure): return unsure.isDirectory
        }
    }

    var knownInode: UInt64? {
        switch self {
        case .entry(let entry): return entry.inode
        case .unsure(let unsure): return unsure.isFollowedByInode ? unsure.inode : nil
        }
    }

    func isSameFile(as entry: Snapshot.Entry) -> Bool {
        switch self {
        case .entry(let known): return known.isSameFile(as: entry)
        case .unsure(let unsure):
            // Known by name only (or by an inode no birth time vouches for yet): the name still
            // there, holding an entry of the same type, is taken to be the same file. (A file
            // where a directory was, or the other way round, is another entry: an exchange, or a
            // replacement, while events were lost.)
            guard unsure.isDirectory == (entry.kind == .directory) else { return false }
            guard unsure.isFollowedByInode else { return true }
            guard entry.inode == unsure.inode else { return false }
            return entry.born.map { !$0.isAfter(unsure.bornBy) } ?? true
        }
    }

    func change(to entry: Snapshot.Entry, renamed: Bool) -> DirectoryChange.Kind? {
        switch self {
        case .entry(let known): return known.change(to: entry, renamed: renamed)
        case .unsure(let unsure):
            // Its status is unknown: only a write after the last event about it can be seen.
            let told = unsure.createdOnly ? (entry.born ?? unsure.since) : unsure.since
            return entry.kind != .directory && entry.modified.isAfter(told) ? .modified : nil
        }
    }
}

extension Snapshot.Time {
    func isAfter(_ other: Snapshot.Time) -> Bool {
        seconds > other.seconds || (seconds == other.seconds && nanoseconds > other.nanoseconds)
    }

    /// A nanosecond earlier.
    var justBefore: Snapshot.Time {
        nanoseconds > 0
            ? Snapshot.Time(seconds: seconds, nanoseconds: nanoseconds - 1)
            : Snapshot.Time(seconds: seconds - 1, nanoseconds: 999_999_999)
    }

    /// No birth time vouches for the file: an inode without it only says where to look.
    static let unvouched = Snapshot.Time(seconds: .min, nanoseconds: 0)
    /// Vouches for an inode whatever the entry's birth time: one known for certain (a watched
    /// directory's).
    static let certain = Snapshot.Time(seconds: .max, nanoseconds: 0)
}
