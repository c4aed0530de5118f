import CDirectoryWatcherShims
import Dispatch

/// A directory's entries at one moment: for each name, what the file system said of the entry
/// it names. Two snapshots of one directory give the changes between them
/// (``changes(from:to:in:)``), which is how a watcher recovers exactly what an overflow of the
/// kernel queue made it miss.
///
/// Read with the cheapest calls there are: `getdents64` on an open directory, then one `statx`
/// per entry relative to that descriptor (no path lookups, no Foundation enumeration).
struct Snapshot: Equatable, Sendable {
    typealias Time = EntryStatus.Time

    /// An entry as `statx` gave it; what a snapshot compares is derived from it below.
    typealias Entry = EntryStatus

    var entries: [[UInt8]: Entry]

    init(entries: [[UInt8]: Entry] = [:]) {
        self.entries = entries
    }

    // MARK: - Reading

    /// Lists the directory at `path`. An entry removed between the listing and its `statx` is
    /// left out, as if the listing had come a moment later.
    static func read(_ path: FileSystemPath, system: System) throws(SyscallError) -> Snapshot {
        let fd = try system.openDirectory(path)
        defer { system.close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 8)
        defer { buffer.deallocate() }
        var snapshot = Snapshot()
        while true {
            let count = try system.readDirectory(fd, into: buffer)
            if count == 0 { return snapshot }
            let parsed = DirectoryEntryParser.parse(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            for listed in parsed.entries {
                guard let status = try system.entryStatus(in: fd, name: listed.name) else { continue }
                snapshot.entries[listed.name] = status
            }
        }
    }

    /// Lists the directory at `path` as ``read(_:system:)`` does, calling `body` with each name
    /// (in a buffer reused for the next) and its status instead of making a table: one
    /// `getdents64` per few hundred entries, a `statx` per entry, no allocation per entry.
    static func visitEntries(
        _ path: FileSystemPath, system: System, _ body: (ArraySlice<UInt8>, EntryStatus) -> Void
    ) throws(SyscallError) {
        let fd = try system.openDirectory(path)
        defer { system.close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 8)
        defer { buffer.deallocate() }
        // A name is at most 255 bytes (NAME_MAX); copied here with its NUL by memcpy, not by a
        // generic append, once per entry.
        var terminated = [UInt8](repeating: 0, count: 257)
        var failure: SyscallError?
        while failure == nil {
            let count = try system.readDirectory(fd, into: buffer)
            if count == 0 { break }
            _ = DirectoryEntryParser.forEach(UnsafeRawBufferPointer(rebasing: buffer[..<count])) { name, _, _ in
                guard failure == nil else { return }
                let length = min(name.count, 256)
                terminated.withUnsafeMutableBytes { copy in
                    if length > 0 { copy.baseAddress!.copyMemory(from: name.baseAddress!, byteCount: length) }
                    copy[length] = 0
                }
                do throws(SyscallError) {
                    // Removed since the listing: left out, as if the listing came a moment later.
                    guard let status = try system.entryStatus(in: fd, terminatedName: terminated) else { return }
                    body(terminated[..<length], status)
                } catch {
                    failure = error
                }
            }
        }
        if let failure { throw failure }
    }

    /// ``visitEntries(_:system:_:)`` for a directory that may be large: its names are read
    /// first, then given their statuses on every core the process may run on (a large directory
    /// in slices, which ``LevelWalk`` shares out as it shares a tree's level), and `body` is
    /// called on this thread in the listing's order. The `statx` per entry is most of a listing's
    /// time; a directory of fewer than ``parallelListing`` entries, or a process on one core,
    /// is listed on this thread alone.
    ///
    /// `expecting`, when given, is called once before `body`, with the number of names and
    /// their bytes (for a table sized to them; not called when one core lists as it reads).
    ///
    /// `slice` and `sharedFrom` are for tests (a small directory shared out in many slices).
    static func visitEntriesOnEveryCore(
        _ path: FileSystemPath, system: System, slice: Int = 256, sharedFrom: Int = parallelListing,
        expecting: ((_ names: Int, _ bytes: Int) -> Void)? = nil, _ body: (ArraySlice<UInt8>, EntryStatus) -> Void
    ) throws(SyscallError) {
        let cores = Int(cdw_usable_cores())
        guard cores > 1 else { return try visitEntries(path, system: system, body) }
        let fd = try system.openDirectory(path)
        defer { system.close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 8)
        defer { buffer.deallocate() }
        // Each name followed by its NUL, end to end; `ends`, the index past each NUL.
        var names: [UInt8] = []
        var ends: [Int] = []
        while true {
            let count = try system.readDirectory(fd, into: buffer)
            if count == 0 { break }
            _ = DirectoryEntryParser.forEach(UnsafeRawBufferPointer(rebasing: buffer[..<count])) { name, _, _ in
                names.append(contentsOf: name)
                names.append(0)
                ends.append(names.count)
            }
        }
        expecting?(ends.count, names.count - ends.count)
        let listed = (names: names, ends: ends)
        let slices = Array(stride(from: 0, to: ends.count, by: slice))
        let statuses = { @Sendable (first: Int) -> Result<[EntryStatus?], SyscallError> in
            var result: [EntryStatus?] = []
            result.reserveCapacity(slice)
            return listed.names.withUnsafeBufferPointer { names in
                names.withMemoryRebound(to: CChar.self) { names in
                    do throws(SyscallError) {
                        for index in first..<min(first + slice, listed.ends.count) {
                            let start = index == 0 ? 0 : listed.ends[index - 1]
                            result.append(try system.entryStatus(in: fd, terminated: names.baseAddress! + start))
                        }
                        return .success(result)
                    } catch {
                        return .failure(error)
                    }
                }
            }
        }
        var failure: SyscallError?
        func report(_ first: Int, _ result: Result<[EntryStatus?], SyscallError>) {
            switch result {
            case .success(let found):
                guard failure == nil else { return }
                for (offset, status) in found.enumerated() {
                    // Removed since the listing: left out, as if the listing came a moment later.
                    guard let status else { continue }
                    let index = first + offset
                    let start = index == 0 ? 0 : listed.ends[index - 1]
                    body(listed.names[start..<(listed.ends[index] - 1)], status)
                }
            case .failure(let error):
                if failure == nil { failure = error }
            }
        }
        if ends.count < sharedFrom {
            for first in slices { report(first, statuses(first)) }
        } else {
            let work = LevelWalk(slices, statuses)
            let helpers = DispatchGroup()
            for _ in 0..<(cores - 1) { DispatchQueue.global().async(group: helpers) { work.walkAll() } }
            for (index, first) in slices.enumerated() { report(first, work.result(index)) }
            helpers.wait()
        }
        if let failure { throw failure }
    }

    /// The entries from which a listing is shared out among the cores.
    static let parallelListing = 4_096

    /// Whether the directory at `path` still holds exactly `old`'s entries, each with the same
    /// status: a poll's common case, answered with the calls a listing makes (`getdents64`, a
    /// `statx` per entry) and no allocation per entry; it stops at the first difference.
    static func isUnchanged(_ path: FileSystemPath, since old: Snapshot, system: System) throws(SyscallError) -> Bool {
        let fd = try system.openDirectory(path)
        defer { system.close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 8)
        defer { buffer.deallocate() }
        var key: [UInt8] = []
        key.reserveCapacity(256)
        var terminated: [UInt8] = []
        terminated.reserveCapacity(257)
        var listed = 0
        var same = true
        var failure: SyscallError?
        while same {
            let count = try system.readDirectory(fd, into: buffer)
            if count == 0 { break }
            _ = DirectoryEntryParser.forEach(UnsafeRawBufferPointer(rebasing: buffer[..<count])) { name, inode, _ in
                guard same else { return }
                key.removeAll(keepingCapacity: true)
                key.append(contentsOf: name)
                guard let before = old.entries[key], before.inode == inode else {
                    same = false
                    return
                }
                terminated.removeAll(keepingCapacity: true)
                terminated.append(contentsOf: name)
                terminated.append(0)
                do throws(SyscallError) {
                    same = try system.entryStatus(in: fd, terminatedName: terminated) == before
                } catch {
                    failure = error
                    same = false
                }
                listed += 1
            }
            if let failure { throw failure }
        }
        return same && listed == old.entries.count
    }

    /// Lists the names, inodes and types of the directory at `path`, with no status per entry: one
    /// `getdents64` per few hundred entries, and no allocation per name (`body` sees each name
    /// in a buffer reused for the next). The type is the listing's (`d_type`); only where the
    /// file system gives none (`DT_UNKNOWN`) is the entry's status read, and an entry removed
    /// meanwhile is left out.
    static func readNames(
        _ path: FileSystemPath, system: System, _ body: (ArraySlice<UInt8>, UInt64, EntryStatus.Kind) -> Void
    ) throws(SyscallError) {
        let fd = try system.openDirectory(path)
        defer { system.close(fd) }
        try readNames(directory: fd, system: system, body)
    }

    /// ``readNames(_:system:_:)`` of a directory already open as `fd` (left open).
    static func readNames(
        directory fd: Int32, system: System, _ body: (ArraySlice<UInt8>, UInt64, EntryStatus.Kind) -> Void
    ) throws(SyscallError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 8)
        defer { buffer.deallocate() }
        // Longer than a name on most file systems (255 bytes), so a slice of it rarely spans the
        // whole array: a caller's `Array(name)` then copies just the name. A slice of the whole
        // array would share this buffer instead: each kept name would hold all of it, and the next
        // name written here would copy it first.
        var scratch = [UInt8](repeating: 0, count: 256)
        var unknown: [(name: [UInt8], inode: UInt64)] = []
        while true {
            let count = try system.readDirectory(fd, into: buffer)
            if count == 0 { break }
            DirectoryEntryParser.forEach(UnsafeRawBufferPointer(rebasing: buffer[..<count])) { bytes, inode, type in
                let name: ArraySlice<UInt8>
                if bytes.count < scratch.count {
                    scratch.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
                    name = scratch[..<bytes.count]
                } else {
                    name = Array(bytes)[...]  // a longer name: an array of its own, just its size
                }
                if let kind = DirectoryEntryParser.kind(type) {
                    body(name, inode, kind)
                } else {
                    unknown.append((Array(name), inode))
                }
            }
        }
        for entry in unknown {
            guard let status = try system.entryStatus(in: fd, name: entry.name) else { continue }
            body(entry.name[...], entry.inode, status.kind)
        }
    }

    /// The inodes of `names` in the directory at `path`, one status each (`statx` on an `O_PATH`
    /// reference to the directory, whose opening no watcher of it sees): `body` sees each name
    /// found, with its inode; a name gone meanwhile is left out, as a listing would leave it.
    static func readInodes(
        of names: [[UInt8]], in path: FileSystemPath, system: System, _ body: (ArraySlice<UInt8>, UInt64) -> Void
    ) throws(SyscallError) {
        let fd = try system.openDirectoryReference(path, followingLinks: true)
        defer { system.close(fd) }
        for name in names {
            guard let status = try system.entryStatus(in: fd, name: name) else { continue }
            body(name[...], status.inode)
        }
    }

    // MARK: - Differences

    /// The changes that turn `old` into `new`, for the directory at `directory`, in an order
    /// that can be applied one after the other: what left, then renames (each before a rename
    /// onto its source's name), then what appeared, then what changed in place.
    ///
    /// - A name whose file left and that no new name took: ``DirectoryChange/Kind/removed``.
    /// - A file that left one name and is found under another: ``DirectoryChange/Kind/renamed``,
    ///   replacing whatever that name held, as a rename does. Renames that form a cycle (two
    ///   names swapped) cannot be applied one after the other; one of them is given as removed
    ///   and created instead.
    /// - A new name that no renamed file explains: ``DirectoryChange/Kind/created``.
    /// - The same file under the same name: ``DirectoryChange/Kind/modified`` when its size or
    ///   modification time changed (not for directories, whose times move with their entries,
    ///   which inotify does not report on the parent either), else
    ///   ``DirectoryChange/Kind/attributesChanged`` when its permissions, owner, group or (for
    ///   files) change time changed. A renamed file that was also written is renamed, then
    ///   modified.
    static func changes(from old: Snapshot, to new: Snapshot, in directory: FileSystemPath) -> [DirectoryChange] {
        differences(from: old, to: new).map { $0.change(in: directory) }
    }

    /// One change between two snapshots, by entry name.
    struct Difference: Equatable {
        var kind: DirectoryChange.Kind
        var name: [UInt8]
        /// For a rename, the name the file left.
        var oldName: [UInt8]?
        var isDirectory: Bool

        func change(in directory: FileSystemPath) -> DirectoryChange {
            DirectoryChange(
                kind: kind, path: directory.appending(bytes: name[...]),
                oldPath: oldName.map { directory.appending(bytes: $0[...]) }, isDirectory: isDirectory)
        }
    }

    /// ``changes(from:to:in:)`` by entry name.
    static func differences(from old: Snapshot, to new: Snapshot) -> [Difference] {
        differences(from: old.entries, to: new)
    }

    /// The changes from what was known of a directory (an entry's full status, or less: see
    /// ``KnownEntry``) to a listing of it, by entry name, in the order ``changes(from:to:in:)``
    /// gives.
    static func differences<Old: KnownEntry>(from old: [[UInt8]: Old], to new: Snapshot) -> [Difference] {
        // Names whose file left, and names that hold a file they did not hold before.
        var left: [[UInt8]] = []
        var arrived: [[UInt8]] = []
        for (name, known) in old where !(new.entries[name].map { known.isSameFile(as: $0) } ?? false) {
            left.append(name)
        }
        for (name, entry) in new.entries where !(old[name]?.isSameFile(as: entry) ?? false) {
            arrived.append(name)
        }
        left.sort(by: Self.byBytes)
        arrived.sort(by: Self.byBytes)

        // A file that left one name and arrived under another was renamed. (Keyed by inode: a
        // file of another device with the same number, under a mount point, is then reported
        // removed and created rather than renamed.)
        var leftByInode: [UInt64: [UInt8]] = [:]
        for name in left {
            if let inode = old[name]!.knownInode { leftByInode[inode] = name }
        }
        var renames: [(from: [UInt8], to: [UInt8])] = []
        var renamedSources: Set<[UInt8]> = []
        var created: [[UInt8]] = []
        for name in arrived {
            let entry = new.entries[name]!
            if let source = leftByInode[entry.inode], old[source]!.isSameFile(as: entry) {
                leftByInode[entry.inode] = nil
                renames.append((source, name))
                renamedSources.insert(source)
            } else {
                created.append(name)
            }
        }
        let renameTargets = Set(renames.map(\.to))

        // Order the renames so that none lands on a name another rename still has to move away.
        var ordered: [(from: [UInt8], to: [UInt8])] = []
        var brokenCycles: [(from: [UInt8], to: [UInt8])] = []
        var pending = renames
        while !pending.isEmpty {
            let sources = Set(pending.map(\.from))
            if let index = pending.firstIndex(where: { !sources.contains($0.to) }) {
                ordered.append(pending.remove(at: index))
            } else {
                brokenCycles.append(pending.removeFirst())
            }
        }

        func change(_ kind: DirectoryChange.Kind, _ name: [UInt8], _ entry: Entry, from: [UInt8]? = nil) -> Difference {
            Difference(kind: kind, name: name, oldName: from, isDirectory: entry.kind == .directory)
        }
        var changes: [Difference] = []
        for name in left where !renamedSources.contains(name) && !renameTargets.contains(name) {
            changes.append(Difference(kind: .removed, name: name, isDirectory: old[name]!.isDirectory))
        }
        for cycle in brokenCycles {
            changes.append(Difference(kind: .removed, name: cycle.from, isDirectory: old[cycle.from]!.isDirectory))
        }
        for rename in ordered {
            changes.append(change(.renamed, rename.to, new.entries[rename.to]!, from: rename.from))
        }
        for name in created { changes.append(change(.created, name, new.entries[name]!)) }
        for cycle in brokenCycles { changes.append(change(.created, cycle.to, new.entries[cycle.to]!)) }

        // What changed in place, renamed files included (under their new name).
        var inPlace: [(name: [UInt8], before: Old, after: Entry)] = []
        for (name, after) in new.entries {
            if let before = old[name], before.isSameFile(as: after) {
                inPlace.append((name, before, after))
            }
        }
        for rename in ordered { inPlace.append((rename.to, old[rename.from]!, new.entries[rename.to]!)) }
        inPlace.sort { Self.byBytes($0.name, $1.name) }
        for (name, before, after) in inPlace {
            if let kind = before.change(to: after, renamed: renameTargets.contains(name)) {
                changes.append(change(kind, name, after))
            }
        }
        return changes
    }

    private static func byBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.lexicographicallyPrecedes(b)
    }
}

/// What a diff needs to know of an entry as it was: whether a listed entry is the same file, and
/// how that file changed in place. A full status (``Snapshot/Entry``) knows exactly; a kept
/// directory may know less of an entry (``KnownDirectory``).
protocol KnownEntry {
    var isDirectory: Bool { get }
    /// The inode, when known: a file found under another name with it may have been renamed.
    var knownInode: UInt64? { get }
    func isSameFile(as entry: Snapshot.Entry) -> Bool
    /// The change of this file when it is now `entry` (under the same name, or `renamed` to it).
    func change(to entry: Snapshot.Entry, renamed: Bool) -> DirectoryChange.Kind?
}

extension EntryStatus: KnownEntry {
    var isDirectory: Bool { kind == .directory }
    var knownInode: UInt64? { inode }

    func change(to after: EntryStatus, renamed: Bool) -> DirectoryChange.Kind? {
        if after.kind != .directory && (size != after.size || modified != after.modified) { return .modified }
        // A rename changes the file's change time itself; only what else changed counts.
        if permissions != after.permissions || owner != after.owner || group != after.group
            || (after.kind != .directory && !renamed && changed != after.changed)
        {
            return .attributesChanged
        }
        return nil
    }
}

extension EntryStatus {
    /// The same file: the same inode of the same device, and, where the file system keeps birth
    /// times, born at the same time (an inode number is reused as soon as it is freed, so a file
    /// removed and another created in its place can share it).
    func isSameFile(as other: EntryStatus) -> Bool {
        guard device == other.device, inode == other.inode else { return false }
        guard let born, let otherBorn = other.born else { return true }
        return born == otherBorn
    }
}
