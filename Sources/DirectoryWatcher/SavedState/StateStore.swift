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
        /// The saved state.
        case saved(SavedDirectories)
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
                return .saved(try StateFileFormat.decode(bytes, expectingRoot: root))
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

    /// The number of a state taken now, on the loop: states are written in this order.
    func numberNext() -> UInt64 {
        lock.withLock {
            taken += 1
            return taken
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
    func write(_ saved: SavedDirectories, number: UInt64) throws(DirectoryWatcherError) {
        let bytes = StateFileFormat.encode(settled(saved))
        let failure = lock.withLock { () -> SyscallError? in
            guard number > written else { return nil }
            do throws(SyscallError) {
                if let writeFile { try writeFile(path, bytes) } else { try system.replaceFile(path, with: bytes) }
                written = number
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
