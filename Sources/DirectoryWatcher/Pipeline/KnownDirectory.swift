/// A watched directory as its watchers have been told it is: the snapshot read when watching
/// started (or at the last rescan), kept up to date from the events as they pass, with no system
/// call per event.
///
/// An entry an event created, wrote or changed is kept by name only (``Known/unknown``): reading
/// its status would cost a `statx` per event. A rescan (``differences(to:)``) then compares names
/// exactly and, for those entries, reports a modification when the file was written after what
/// the watchers were told of it: after its birth, for an entry only its creation was reported of;
/// after the moment the last event about it was read, for the others.
///
/// The events also tell which changes a watcher has been told already: after a rescan has reported
/// an entry as created, the kernel's own `IN_CREATE` for it may still be queued; it finds the name
/// known and is not reported again (``apply(_:)``).
final class KnownDirectory {
    enum Known: Equatable {
        /// The status read at the last listing, unchanged by any event since.
        case entry(Snapshot.Entry)
        /// An entry whose status changed (or was never read) since the last listing: the
        /// wall-clock time its last event was read, and whether that event was its creation.
        case unknown(isDirectory: Bool, since: Snapshot.Time, createdOnly: Bool)
    }

    /// An entry name as a key: hashed in one pass over its bytes, and looked up with a slice of
    /// the read's buffer (no copy per event); a name stored is a copy of its own, so no key keeps
    /// a whole read alive.
    struct Name: Hashable {
        let bytes: ArraySlice<UInt8>

        init(looking bytes: ArraySlice<UInt8>) { self.bytes = bytes }
        init(keeping bytes: ArraySlice<UInt8>) { self.bytes = Array(bytes)[...] }
        init(_ bytes: [UInt8]) { self.bytes = bytes[...] }

        static func == (a: Name, b: Name) -> Bool { a.bytes.elementsEqual(b.bytes) }

        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    private(set) var entries: [Name: Known]

    init(_ snapshot: Snapshot) {
        entries = Self.entries(of: snapshot)
    }

    private static func entries(of snapshot: Snapshot) -> [Name: Known] {
        var entries: [Name: Known] = [:]
        entries.reserveCapacity(snapshot.entries.count)
        for (name, entry) in snapshot.entries { entries[Name(name)] = .entry(entry) }
        return entries
    }

    /// Applies an event about `name` (not half of a paired rename: see ``renamed(from:to:at:)``).
    /// Returns false when the event repeats what the watchers have been told already (an entry
    /// created that is known, one removed that is not), so it is not reported again.
    func apply(_ event: InotifyEvent, at now: Snapshot.Time) -> Bool {
        let isDirectory = event.has(InotifyMask.isDirectory)
        if event.has(InotifyMask.create) {
            // A name cannot be created while it exists: the rescan reported this one already.
            // (One hash for the common case; a repeat puts back what it replaced.)
            let key = Name(keeping: event.name)
            let created = Known.unknown(isDirectory: isDirectory, since: now, createdOnly: true)
            guard let known = entries.updateValue(created, forKey: key) else { return true }
            entries[key] = known
            return false
        }
        let name = Name(looking: event.name)
        if event.has(InotifyMask.movedTo) {
            // A rename may replace an entry: always news.
            entries[Name(keeping: event.name)] = .unknown(isDirectory: isDirectory, since: now, createdOnly: false)
            return true
        }
        if event.has(InotifyMask.delete | InotifyMask.movedFrom) {
            return entries.removeValue(forKey: name) != nil
        }
        if event.has(InotifyMask.modify | InotifyMask.attributes | InotifyMask.closeWrite),
            let index = entries.index(forKey: name)
        {
            entries.values[index] = .unknown(isDirectory: isDirectory, since: now, createdOnly: false)
        }
        return true
    }

    /// A rename within the directory: the entry keeps what is known of it under its new name.
    func renamed(from: ArraySlice<UInt8>, to: ArraySlice<UInt8>, at now: Snapshot.Time) {
        let known = entries.removeValue(forKey: Name(looking: from))
        entries[Name(keeping: to)] = known ?? .unknown(isDirectory: false, since: now, createdOnly: false)
    }

    /// Takes out an entry that moved to another watched directory.
    func takeOut(_ name: ArraySlice<UInt8>) -> Known? {
        entries.removeValue(forKey: Name(looking: name))
    }

    /// Puts in an entry that moved here from another watched directory.
    func putIn(_ name: ArraySlice<UInt8>, _ known: Known?, isDirectory: Bool, at now: Snapshot.Time) {
        entries[Name(keeping: name)] = known ?? .unknown(isDirectory: isDirectory, since: now, createdOnly: false)
    }

    /// The changes from what is known to `current`, by name, in an order that applies. An entry
    /// known by name only is taken to be the same file if the name is still there (reported as
    /// modified when it was written after what the watchers were told of it), and as removed if
    /// not.
    func differences(to current: Snapshot) -> [Snapshot.Difference] {
        var exactlyKnown = Snapshot()
        var current = current
        var removed: [Snapshot.Difference] = []
        var touched: [Snapshot.Difference] = []
        for (key, known) in entries {
            let name = Array(key.bytes)
            switch known {
            case .entry(let entry):
                exactlyKnown.entries[name] = entry
            case .unknown(let isDirectory, let since, let createdOnly):
                guard let now = current.entries.removeValue(forKey: name) else {
                    removed.append(Snapshot.Difference(kind: .removed, name: name, isDirectory: isDirectory))
                    continue
                }
                let told = createdOnly ? (now.born ?? since) : since
                if now.kind != .directory && now.modified.isAfter(told) {
                    touched.append(Snapshot.Difference(kind: .modified, name: name, isDirectory: false))
                }
            }
        }
        removed.sort { $0.name.lexicographicallyPrecedes($1.name) }
        touched.sort { $0.name.lexicographicallyPrecedes($1.name) }
        return removed + Snapshot.differences(from: exactlyKnown, to: current) + touched
    }

    /// After a rescan: what is known is what was listed.
    func reset(to snapshot: Snapshot) {
        entries = Self.entries(of: snapshot)
    }
}

extension Snapshot.Time {
    func isAfter(_ other: Snapshot.Time) -> Bool {
        seconds > other.seconds || (seconds == other.seconds && nanoseconds > other.nanoseconds)
    }
}
