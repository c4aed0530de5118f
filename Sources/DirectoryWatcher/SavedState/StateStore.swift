import Glibc

/// One watcher's state file: read when it starts, written at each save, newest last.
///
/// States are taken on the loop in order, each numbered; they are written off the loop (a write
/// syncs the disk, which takes milliseconds), one at a time, and a state older than the one on
/// disk is never written over it.
final class StateStore: @unchecked Sendable {
    let path: FileSystemPath
    /// A file that cannot be used is replaced (at the first save) rather than refused.
    let startsFreshWhenUnusable: Bool
    private let system: System
    private let lock = Lock()
    /// Under `lock`: the number of the next state taken, and of the newest written.
    private var taken: UInt64 = 0
    private var written: UInt64 = 0
    /// The journal: the paths of the changes delivered since the last save, appended before each
    /// batch reaches the delegate (no sync: a killed process's writes stay in the page cache).
    /// A start from the state also reports what became of each, so that a change delivered
    /// after the last save and undone before the next start is not left standing in the
    /// consumer's view. Under `lock`; -1 when not open.
    private var journalFD: Int32 = -1
    private var journalLength = 0
    /// Bytes trimmed off the journal's front so far: a state's journal length is counted from
    /// the first byte ever appended, so that trims in between do not shift it.
    private var journalTrimmed = 0
    var journalPath: FileSystemPath { FileSystemPath(bytes: path.bytes + Array(".journal".utf8)) }
    /// For tests: a start's decoding waits until the loop has asked for it this many times
    /// (``StateLoad/init(waitingForAsks:decoding:)``).
    var decodingWaitsForAsks = 0
    /// For tests: replaces the write (a full disk on cue).
    var writeFile: ((FileSystemPath, [UInt8]) throws(SyscallError) -> Void)?

    init(path: FileSystemPath, startsFreshWhenUnusable: Bool, system: System) {
        self.path = path
        self.startsFreshWhenUnusable = startsFreshWhenUnusable
        self.system = system
    }

    /// What a start begins from.
    enum Start {
        /// No state file: nothing to report; the first state is saved at once.
        case fresh
        /// A saved state of the root, its header, version and checksum checked: its directories
        /// are read by ``decode(_:)``, while the watch starts.
        case saved(checked: [UInt8])
        /// The file could not be used, and the caller chose to start from an empty state: every
        /// entry is new, after `notice`.
        case replaced(notice: DirectoryWatcherError)
    }

    /// Reads the state of `root`. Throws when the file is there and cannot be used, unless the
    /// the caller chose to start fresh.
    func load(root: FileSystemPath) throws(DirectoryWatcherError) -> Start {
        let problem: DirectoryWatcherError
        do throws(SyscallError) {
            guard let bytes = try system.readFile(path) else { return .fresh }
            do throws(StateFileFormat.Problem) {
                try StateFileFormat.check(bytes, expectingRoot: root)
                return .saved(checked: bytes)
            } catch {
                problem = DirectoryWatcherError(code: .savedStateUnusable, path: path, detail: error.description)
            }
        } catch {
            // Unreadable (permissions, a directory of that name): replaced, it would be lost.
            throw DirectoryWatcherError(
                code: .savedStateUnusable, path: path, function: error.function, errno: error.errno,
                detail: "\(error.function) failed: \(SyscallError.describe(error.errno))")
        }
        guard startsFreshWhenUnusable else { throw problem }
        return .replaced(notice: problem)
    }

    /// The directories of a state ``load(root:)`` checked; what a start does when they do not
    /// parse (a checksum that matches a body that does not is the writer's fault, not the
    /// disk's): refused, or a fresh start with a notice, as the caller chose.
    func decode(_ checked: [UInt8]) -> StateLoad.Outcome {
        do throws(StateFileFormat.Problem) {
            return .state(try StateFileFormat.decodeChecked(checked))
        } catch {
            let problem = DirectoryWatcherError(code: .savedStateUnusable, path: path, detail: error.description)
            return startsFreshWhenUnusable ? .fresh(notice: notice(problem)) : .refused(problem)
        }
    }

    /// The notice a fresh start in place of an unusable state begins with.
    func notice(_ problem: DirectoryWatcherError) -> DirectoryChange {
        DirectoryChange(kind: .failed, path: path, isDirectory: false, whileStopped: true, error: problem)
    }

    /// The number of a state taken now, on the loop (states are written in this order), and
    /// how long the journal was then: what it held then is in the state.
    func numberNext() -> (number: UInt64, journaled: Int) {
        lock.withLock {
            taken += 1
            return (taken, journalTrimmed + journalLength)
        }
    }

    /// A journaled path: what a delivered change named, and whether it was a directory.
    struct JournalEntry: Hashable {
        var path: FileSystemPath
        var isDirectory: Bool
    }

    /// Opens the journal for this start: the paths it holds when the start begins from the
    /// state (`keeping`), and none otherwise (it is emptied).
    func openJournal(keeping: Bool) -> [JournalEntry] {
        var entries: [JournalEntry] = []
        if keeping, let bytes = try? system.readFile(journalPath) {
            var index = 0
            // Records: a flags byte, a u32 length (little-endian), the path. A record cut short by
            // a kill ends the journal.
            while bytes.count - index >= 5 {
                let flags = bytes[index]
                let length = bytes[(index + 1)..<(index + 5)].enumerated().reduce(0) {
                    $0 | Int($1.element) << (8 * $1.offset)
                }
                guard bytes.count - index - 5 >= length else { break }
                entries.append(
                    JournalEntry(
                        path: FileSystemPath(bytes: bytes[(index + 5)..<(index + 5 + length)]),
                        isDirectory: flags & 1 != 0))
                index += 5 + length
            }
        }
        lock.withLock {
            if journalFD >= 0 { system.close(journalFD) }
            journalFD = (try? system.openForAppending(journalPath, truncating: !keeping)) ?? -1
            journalLength = keeping ? (try? system.readFile(journalPath))?.count ?? 0 : 0
            journalTrimmed = 0
        }
        return entries
    }

    /// Appends the paths of the changes that make or take away an entry.
    func journal(_ changes: [DirectoryChange]) {
        var bytes: [UInt8] = []
        func record(_ path: FileSystemPath, _ isDirectory: Bool) {
            bytes.append(isDirectory ? 1 : 0)
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: path.bytes.count).littleEndian) {
                bytes.append(contentsOf: $0)
            }
            bytes.append(contentsOf: path.bytes)
        }
        for change in changes {
            switch change.kind {
            case .created, .removed, .renamed, .movedIn, .movedOut, .exchanged:
                record(change.path, change.isDirectory)
                if let old = change.oldPath { record(old, change.isDirectory) }
            default:
                break
            }
        }
        guard !bytes.isEmpty else { return }
        lock.withLock {
            guard journalFD >= 0 else { return }
            if (try? system.append(bytes, to: journalFD)) != nil { journalLength += bytes.count }
        }
    }

    /// After a state was written: the journal keeps only what was appended after it was taken.
    private func trimJournal(to journaled: Int) {
        let taken = journaled - journalTrimmed
        guard journalFD >= 0, taken > 0 else { return }
        guard let bytes = try? system.readFile(journalPath), bytes.count >= taken else { return }
        let rest = Array(bytes[taken...])
        guard (try? system.replaceFile(journalPath, with: rest)) != nil else { return }
        system.close(journalFD)
        journalFD = (try? system.openForAppending(journalPath, truncating: false)) ?? -1
        journalLength = rest.count
        journalTrimmed += taken
    }

    func closeJournal() {
        lock.withLock {
            if journalFD >= 0 { system.close(journalFD) }
            journalFD = -1
        }
    }

    /// The state with what events alone said of an entry (no status: a tree's entries, files
    /// written since their last listing) replaced by the entry's status, where the status is
    /// what the watcher was told: the file last changed before ``SavedDirectories/readBefore``
    /// (its changes were all read, and delivered, before the state was taken). The others keep
    /// what events said, and count a write in the tick of that read or later as news: at worst
    /// a change is reported again, never missed. (File times have the file system's clock
    /// tick, a few milliseconds, so a change in the tick of the read cannot be told from one
    /// after it.)
    private func settled(_ saved: SavedDirectories) -> SavedDirectories {
        let before = saved.readBefore
        guard before != .unvouched else { return saved }
        var result = saved
        for index in result.directories.indices {
            var entries = result.directories[index].entries
            var unsure: [([UInt8], KnownDirectory.Unsure)] = []
            entries.forEach { name, known in
                if case .unsure(let value) = known { unsure.append((Array(name), value)) }
            }
            guard !unsure.isEmpty else { continue }
            let relative = result.directories[index].path
            let directory = relative.isEmpty ? saved.root : saved.root.appending(bytes: relative)
            let fd = try? system.openDirectory(directory, followingLinks: false)
            defer { if let fd { system.close(fd) } }
            for (name, value) in unsure {
                if let fd, let status = try? system.entryStatus(in: fd, name: name),
                    (status.kind == .directory) == value.isDirectory, value.inode == 0 || status.inode == value.inode,
                    before.isAfter(status.changed)
                {
                    entries.updateValue(.entry(status), forName: name[...])
                } else if value.since.isAfter(before.justBefore) {
                    var counted = value
                    counted.since = before.justBefore
                    entries.updateValue(.unsure(counted), forName: name[...])
                }
            }
            result.directories[index].entries = entries
        }
        return result
    }

    /// Writes the state numbered `number`, unless a newer one is on disk already.
    func write(_ saved: SavedDirectories, number: UInt64, journaled: Int = 0) throws(DirectoryWatcherError) {
        let bytes = StateFileFormat.encode(settled(saved))
        let failure = lock.withLock { () -> SyscallError? in
            guard number > written else { return nil }
            do throws(SyscallError) {
                if let writeFile { try writeFile(path, bytes) } else { try system.replaceFile(path, with: bytes) }
                written = number
                trimJournal(to: journaled)
                return nil
            } catch {
                return error
            }
        }
        if let failure {
            throw DirectoryWatcherError(
                code: .savedStateNotWritten, path: path, function: failure.function, errno: failure.errno)
        }
    }
}
