/// A settling watcher's changes since its last batch, folded into what they add up to.
///
/// Each entry is followed by identity through renames: a record says how the entry began in this
/// batch (it existed under some path, was created, or was moved in), where it is now (a path, or
/// removed, or moved out), and what else happened to it (written, attributes changed, ...). The
/// batch handed over says only what the records add up to, in the order the entries first
/// changed (Docs: Settling):
///
/// - created then written: one `created`; created then removed (or moved out): nothing;
/// - renamed a to b to c: one rename a to c (back to a: nothing);
/// - written, then renamed: the rename, then `modified` under the new name;
/// - a directory removed with its contents: one removal (unless ``listsRemovedContents``);
/// - many writes: one `modified`.
///
/// Pure: no clock, no system call. ``Settler`` decides when the batch is handed over.
struct SettledBatch {
    /// How an entry began in this batch.
    enum Start: Equatable {
        /// It existed under this path when the batch began.
        case existed(FileSystemPath)
        case created
        case movedIn(from: FileSystemPath?)
    }

    /// Where an entry is now.
    enum End: Equatable {
        case present
        case removed
        case movedOut
    }

    struct Record {
        var start: Start
        var end: End
        /// Its path now, or the last path it had.
        var path: FileSystemPath
        var isDirectory: Bool
        /// Other kinds seen for it (`modified`, `attributesChanged`, opens, reads, closes), each
        /// once, in the order first seen.
        var kinds: [DirectoryChange.Kind] = []
        var foundByRescan: Bool
        /// Emission order: when it first changed (a renamed directory moves before its entries).
        var sequence: Int
    }

    /// Whether a removed directory's entries are listed too, each as removed.
    let listsRemovedContents: Bool

    private var records: [Record?] = []
    /// Records of entries present now, by path.
    private var present: [FileSystemPath: Int] = [:]
    /// Overflow notices: handed over first, since the batch as a whole is what changed.
    private var notices: [DirectoryChange] = []
    /// The change that ended the watch (root removed or moved): handed over last.
    private var ending: DirectoryChange?
    private var nextSequence = 0
    private var live = 0

    init(listsRemovedContents: Bool = false) {
        self.listsRemovedContents = listsRemovedContents
    }

    /// Nothing to hand over.
    var isEmpty: Bool { live == 0 && notices.isEmpty && ending == nil }

    /// Folds one change in.
    mutating func add(_ change: DirectoryChange) {
        switch change.kind {
        case .overflow, .failed:
            notices.append(change)
        case .rootRemoved:
            // Everything below the root went with it.
            if !listsRemovedContents { removeAll { _ in true } }
            ending = change
        case .rootMoved:
            ending = change
        case .created:
            replace(change.path)
            insert(
                Record(
                    start: .created, end: .present, path: change.path, isDirectory: change.isDirectory,
                    foundByRescan: change.foundByRescan, sequence: 0))
        case .movedIn:
            replace(change.path)
            insert(
                Record(
                    start: .movedIn(from: change.oldPath), end: .present, path: change.path,
                    isDirectory: change.isDirectory, foundByRescan: change.foundByRescan, sequence: 0))
        case .removed, .movedOut:
            leave(
                change.path, isDirectory: change.isDirectory, as: change.kind == .removed ? .removed : .movedOut,
                foundByRescan: change.foundByRescan)
        case .renamed:
            guard let old = change.oldPath else { return }
            rename(old, to: change.path, isDirectory: change.isDirectory, foundByRescan: change.foundByRescan)
        case .exchanged:
            guard let other = change.oldPath, other != change.path else { return }
            exchange(other, change.path, isDirectory: change.isDirectory, foundByRescan: change.foundByRescan)
        case .modified, .attributesChanged, .opened, .accessed, .writerClosed, .readerClosed:
            let index = record(at: change.path, isDirectory: change.isDirectory, foundByRescan: change.foundByRescan)
            if !records[index]!.kinds.contains(change.kind) { records[index]!.kinds.append(change.kind) }
        }
    }

    /// What the batch adds up to, in order, and an empty batch to start again.
    mutating func take() -> [DirectoryChange] {
        var result = notices
        let ordered = records.compactMap { $0 }.sorted {
            ($0.sequence, $0.path.bytes.count) < ($1.sequence, $1.path.bytes.count)
        }
        // Entries that went round in a cycle of names (exchanges) come out as exchanges: as
        // renames, applied in order, they would lose a name.
        var movedFrom: [FileSystemPath: Int] = [:]
        for (index, record) in ordered.enumerated() {
            if case .existed(let original) = record.start, record.end == .present, original != record.path {
                movedFrom[original] = index
            }
        }
        var inCycle = Set<Int>()
        for (index, record) in ordered.enumerated() {
            if inCycle.contains(index) { continue }
            if case .existed(let original) = record.start, record.end == .present, original != record.path,
                let cycle = Self.cycle(from: index, in: ordered, movedFrom: movedFrom)
            {
                inCycle.formUnion(cycle)
                // (p1 -> p2 -> ... -> pk -> p1) is exchange(p1, p2), then (p1, p3), ..., (p1, pk).
                // Each exchange puts one entry where it ends: the one before `member` in the cycle.
                for position in 1..<cycle.count {
                    let moved = ordered[cycle[position - 1]]
                    result.append(
                        DirectoryChange(
                            kind: .exchanged, path: moved.path, oldPath: original, isDirectory: moved.isDirectory,
                            foundByRescan: moved.foundByRescan))
                }
                for member in cycle { Self.emitChanges(of: ordered[member], into: &result) }
                continue
            }
            Self.emit(record, into: &result)
        }
        if let ending { result.append(ending) }
        self = SettledBatch(listsRemovedContents: listsRemovedContents)
        return result
    }

    /// The records, starting with `start`, whose entries went round a cycle of names: each now at
    /// the path the next had (the last at the first's); nil when the names do not close a cycle.
    private static func cycle(from start: Int, in ordered: [Record], movedFrom: [FileSystemPath: Int]) -> [Int]? {
        var members = [start]
        var current = start
        while members.count <= ordered.count {
            // Who was at the path this entry took?
            guard let next = movedFrom[ordered[current].path] else { return nil }
            if next == start { return members.count > 1 ? members : nil }
            members.append(next)
            current = next
        }
        return nil
    }

    /// A present record's other changes (written, attributes), under its path now.
    private static func emitChanges(of record: Record, into result: inout [DirectoryChange]) {
        for kind in record.kinds {
            result.append(
                DirectoryChange(
                    kind: kind, path: record.path, isDirectory: record.isDirectory, foundByRescan: record.foundByRescan)
            )
        }
    }

    private static func emit(_ record: Record, into result: inout [DirectoryChange]) {
        let (path, directory, rescan) = (record.path, record.isDirectory, record.foundByRescan)
        switch (record.start, record.end) {
        case (.created, .present):
            result.append(DirectoryChange(kind: .created, path: path, isDirectory: directory, foundByRescan: rescan))
        case (.movedIn(let from), .present):
            result.append(
                DirectoryChange(
                    kind: .movedIn, path: path, oldPath: from, isDirectory: directory, foundByRescan: rescan))
        case (.existed(let original), .present):
            if original != path {
                result.append(
                    DirectoryChange(
                        kind: .renamed, path: path, oldPath: original, isDirectory: directory, foundByRescan: rescan))
            }
            emitChanges(of: record, into: &result)
        case (.existed(let original), .removed):
            result.append(
                DirectoryChange(kind: .removed, path: original, isDirectory: directory, foundByRescan: rescan))
        case (.existed(let original), .movedOut):
            result.append(
                DirectoryChange(kind: .movedOut, path: original, isDirectory: directory, foundByRescan: rescan))
        case (.created, _), (.movedIn, _):
            break  // came and went within the batch
        }
    }

    // MARK: - Records

    private mutating func insert(_ record: Record) {
        var record = record
        record.sequence = nextSequence
        nextSequence += 1
        records.append(record)
        present[record.path] = records.count - 1
        live += 1
    }

    /// The present record at `path`, made (an entry that existed) when there is none.
    private mutating func record(at path: FileSystemPath, isDirectory: Bool, foundByRescan: Bool) -> Int {
        if let index = present[path] { return index }
        insert(
            Record(
                start: .existed(path), end: .present, path: path, isDirectory: isDirectory,
                foundByRescan: foundByRescan, sequence: 0))
        return records.count - 1
    }

    private mutating func drop(_ index: Int) {
        guard let record = records[index] else { return }
        if record.end == .present, present[record.path] == index { present[record.path] = nil }
        records[index] = nil
        live -= 1
    }

    /// An entry appears at `path` while a record says one is there (a rename or move over it,
    /// or events lost): that one was replaced, which is its removal.
    private mutating func replace(_ path: FileSystemPath) {
        guard let index = present[path] else { return }
        end(index, as: .removed, foundByRescan: records[index]!.foundByRescan)
    }

    /// The entry of record `index` is gone: removed or moved out.
    private mutating func end(_ index: Int, as end: End, foundByRescan: Bool) {
        guard let record = records[index] else { return }
        if case .existed = record.start {
            present[record.path] = nil
            records[index]!.end = end
            records[index]!.kinds = []
            records[index]!.foundByRescan = foundByRescan
        } else {
            drop(index)  // created or moved in within the batch: nothing to say
        }
    }

    private mutating func leave(_ path: FileSystemPath, isDirectory: Bool, as end: End, foundByRescan: Bool) {
        let index = record(at: path, isDirectory: isDirectory, foundByRescan: foundByRescan)
        self.end(index, as: end, foundByRescan: foundByRescan)
        guard isDirectory, !listsRemovedContents || end == .movedOut else { return }
        // What was below it went with it: said by its own removal. An entry that came from
        // elsewhere in the watch and was lost with it is reported under the path it had.
        let directory = path
        removeAll { record in
            guard record.path.isBelow(directory) else { return false }
            if case .existed(let original) = record.start, !original.isBelow(directory) { return false }
            return true
        }
        for index in records.indices {
            guard let record = records[index], record.end == .present, record.path.isBelow(directory) else { continue }
            self.end(index, as: end, foundByRescan: foundByRescan)
        }
    }

    private mutating func rename(_ old: FileSystemPath, to new: FileSystemPath, isDirectory: Bool, foundByRescan: Bool)
    {
        let index = record(at: old, isDirectory: isDirectory, foundByRescan: foundByRescan)
        if new != old { replace(new) }
        present[old] = nil
        records[index]!.path = new
        records[index]!.foundByRescan = records[index]!.foundByRescan || foundByRescan
        present[new] = index
        guard isDirectory, new != old else { return }
        // Its entries' changes are reported under the new path; the directory's rename comes
        // before them.
        var earliest = records[index]!.sequence
        for other in records.indices where other != index {
            guard var record = records[other], record.path.isBelow(old) else { continue }
            if record.end == .present, present[record.path] == other { present[record.path] = nil }
            record.path = record.path.replacingPrefix(old, with: new)
            if case .existed(let original) = record.start, original.isBelow(old) {
                record.start = .existed(original.replacingPrefix(old, with: new))
            }
            if record.end == .present { present[record.path] = other }
            earliest = min(earliest, record.sequence)
            records[other] = record
        }
        records[index]!.sequence = earliest
    }

    /// The entries at `first` and `second` exchanged names; the one now at `second` (that was at
    /// `first`) is a directory when `isDirectory`. What is below each follows it.
    private mutating func exchange(
        _ first: FileSystemPath, _ second: FileSystemPath, isDirectory: Bool, foundByRescan: Bool
    ) {
        let moving = record(at: first, isDirectory: isDirectory, foundByRescan: foundByRescan)
        let other = record(at: second, isDirectory: false, foundByRescan: foundByRescan)
        // The exchange comes before what happened below either directory.
        var earliest = min(records[moving]!.sequence, records[other]!.sequence)
        for record in records {
            guard let record, record.path.isBelow(first) || record.path.isBelow(second) else { continue }
            earliest = min(earliest, record.sequence)
        }
        for index in records.indices {
            guard var record = records[index] else { continue }
            let wasPresent = record.end == .present && present[record.path] == index
            let target: (FileSystemPath, FileSystemPath)?
            if index == moving || record.path.isBelow(first) {
                target = (first, second)
            } else if index == other || record.path.isBelow(second) {
                target = (second, first)
            } else {
                target = nil
            }
            guard let (from, to) = target else { continue }
            if wasPresent { present[record.path] = nil }
            record.path = record.path.replacingPrefix(from, with: to)
            if index != moving, index != other, case .existed(let original) = record.start, original.isBelow(from) {
                record.start = .existed(original.replacingPrefix(from, with: to))
            }
            if index == moving || index == other {
                record.sequence = earliest
                record.foundByRescan = record.foundByRescan || foundByRescan
            }
            records[index] = record
        }
        for index in records.indices {
            guard let record = records[index], record.end == .present,
                index == moving || index == other || record.path.isBelow(first) || record.path.isBelow(second)
            else { continue }
            present[record.path] = index
        }
    }

    private mutating func removeAll(where shouldRemove: (Record) -> Bool) {
        for index in records.indices {
            if let record = records[index], shouldRemove(record) { drop(index) }
        }
    }
}

extension FileSystemPath {
    /// Whether this path is strictly below `directory`.
    func isBelow(_ directory: FileSystemPath) -> Bool {
        let prefix = directory.bytes
        guard bytes.count > prefix.count + 1, bytes[prefix.count] == UInt8(ascii: "/") else { return false }
        return bytes.starts(with: prefix)
    }

    /// This path with `prefix` (a directory it is below, or itself) replaced by `replacement`.
    func replacingPrefix(_ prefix: FileSystemPath, with replacement: FileSystemPath) -> FileSystemPath {
        FileSystemPath(bytes: replacement.bytes + bytes[prefix.bytes.count...])
    }
}
