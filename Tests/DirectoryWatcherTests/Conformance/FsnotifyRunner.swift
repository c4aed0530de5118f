import DirectoryWatcher
import Dispatch
import Foundation
import Glibc

/// Runs one fsnotify script in a fresh directory against the library.
///
/// fsnotify's `Watcher` is one set of paths over one channel; here it is one of our watchers per
/// path (`watchFolder` for a directory, `watchFile` for anything else), all reporting into one
/// list. Commands are system calls made here, never a shell. Where fsnotify pauses (50 ms after
/// each command, inside `echo` after the open and after the write, 500 ms at the end, `sleep`),
/// the runner waits on every watcher's barrier instead: everything done so far has then been
/// delivered, and the kernel has not merged events across the pause, as it merges identical
/// unread events.
final class FsnotifyRunner {
    enum Outcome {
        case finished(have: [FsnotifyEvent])
        case skipped(String)
        case failed(String)
    }

    private struct Failure: Error {
        let message: String
    }

    /// What the watchers' callbacks share with the runner, under a lock.
    private final class Shared: @unchecked Sendable {
        private let lock = NSLock()
        private var events: [FsnotifyEvent] = []
        private var errors: [String] = []
        /// The script's watches by path (as the script writes it), while they live.
        private var watches: [String: DirectoryWatcher] = [:]

        func record(_ new: [FsnotifyEvent]) { lock.withLock { events += new } }
        func fail(_ message: String) { lock.withLock { errors.append(message) } }
        var recorded: ([FsnotifyEvent], [String]) { lock.withLock { (events, errors) } }

        func isWatched(_ path: String) -> Bool { lock.withLock { watches[path] != nil } }
        func watcher(_ path: String) -> DirectoryWatcher? { lock.withLock { watches[path] } }
        func add(_ watcher: DirectoryWatcher, for path: String) { lock.withLock { watches[path] = watcher } }
        /// Forgets the watch of `path` and returns it.
        func remove(_ path: String) -> DirectoryWatcher? {
            lock.withLock { watches.removeValue(forKey: path) }
        }
        var all: [DirectoryWatcher] { lock.withLock { Array(watches.values) } }
        var paths: Set<String> { lock.withLock { Set(watches.keys) } }
        func removeAll() -> [DirectoryWatcher] {
            lock.withLock {
                defer { watches = [:] }
                return Array(watches.values)
            }
        }
    }

    private let script: FsnotifyScript
    private let directory = TemporaryDirectory()
    private let shared = Shared()
    /// The backend of every watch the script makes (a recursive one is fanotify's, as root, unless
    /// told otherwise).
    private let backend: DirectoryWatcher.Backend

    init(_ script: FsnotifyScript, backend: DirectoryWatcher.Backend = .automatic) {
        self.script = script
        self.backend = backend
    }

    func run() -> Outcome {
        defer { for watcher in shared.removeAll() { watcher.invalidate() } }
        do {
            for command in script.commands {
                if let reason = try execute(command) {
                    if reason.isEmpty { break }  // `stop`
                    return .skipped(reason)
                }
            }
            try settle()
        } catch let failure as Failure {
            return .failed(failure.message)
        } catch {
            return .failed("\(error)")
        }
        let (events, errors) = shared.recorded
        if !errors.isEmpty { return .failed(errors.joined(separator: "; ")) }
        return .finished(have: events)
    }

    // MARK: - Commands

    /// Runs one command. Returns a reason to skip the script, "" for `stop`, nil to go on.
    private func execute(_ command: FsnotifyScript.Command) throws -> String? {
        let words = command.words
        let arguments = Array(words.dropFirst())
        func fail(_ message: String) -> Failure {
            Failure(message: "line \(command.line) `\(words.joined(separator: " "))`: \(message)")
        }
        func check(_ result: Int32, _ what: String) throws {
            if result != 0 { throw fail("\(what): \(String(cString: strerror(errno)))") }
        }
        func argument(_ index: Int) throws -> String {
            guard index < arguments.count else { throw fail("missing argument") }
            return arguments[index]
        }

        switch words.first ?? "" {
        case "require":
            let feature = try argument(0)
            if FsnotifyExceptions.supportedFeatures.contains(feature) { return nil }
            if let reason = FsnotifyExceptions.unsupportedFeatures[feature] { return reason }
            throw fail("unknown requirement")
        case "skip":
            let what = try argument(0)
            if FsnotifyExceptions.otherPlatforms.contains(what) { return nil }
            if what == "always" || what == "linux" { return "the script says `skip \(what)`" }
            throw fail("unknown skip condition")
        case "stop":
            return ""
        case "state", "debug", "print":
            return nil
        case "sleep":
            try settle()
            return nil
        case "watch":
            try watch(Self.scriptPath(try argument(0)), operations: Array(arguments.dropFirst()), fail: fail)
        case "unwatch":
            var name = try argument(0)
            if name.hasSuffix("/...") { name = String(name.dropLast(4)) }
            guard let watcher = shared.remove(Self.scriptPath(name)) else { throw fail("not watched") }
            try settle(also: [watcher])
            watcher.invalidate()
        case "watchlist":
            // fsnotify lists every directory it watches: a tree's, each of them.
            let root = directory.path
            let paths = Set(
                shared.all.flatMap { watcher in
                    watcher.watchedDirectories().map { Self.relative($0, root: root) }
                })
            if arguments.count == 1, let count = Int(arguments[0]) {
                if paths.count != count { throw fail("\(paths.count) watches: \(paths.sorted())") }
            } else if paths != Set(arguments.map(Self.scriptPath)) {
                throw fail("watches are \(paths.sorted())")
            }
            return nil
        case "touch":
            let fd = open(path(try argument(0)), O_RDWR | O_CREAT | O_TRUNC, 0o666)
            if fd < 0 { throw fail("open: \(String(cString: strerror(errno)))") }
            close(fd)
        case "mkdir":
            if arguments.first == "-p" {
                try makeDirectories(path(try argument(1)), fail: fail)
            } else {
                try check(mkdir(path(try argument(0)), 0o755), "mkdir")
            }
        case "ln":
            guard arguments.count == 3, arguments[0] == "-s" else { throw fail("expected `ln -s TARGET LINK`") }
            let target = arguments[1].hasPrefix("./") ? arguments[1] : path(arguments[1])
            try check(symlink(target, path(arguments[2])), "symlink")
        case "mkfifo":
            try check(mkfifo(path(try argument(0)), 0o644), "mkfifo")
        case "mknod":
            // fsnotify calls mknod(path, 0644, dev): no file type bits, so a regular file.
            guard let device = UInt(try argument(0)) else { throw fail("bad device number") }
            try check(mknod(path(try argument(1)), 0o644, __dev_t(device)), "mknod")
        case "mv":
            try check(rename(path(try argument(0)), path(try argument(1))), "rename")
        case "rm":
            if arguments.first == "-r" {
                try removeTree(path(try argument(1)), fail: fail)
            } else {
                try remove(path(try argument(0)), fail: fail)
            }
        case "chmod":
            guard let mode = mode_t(try argument(0), radix: 8) else { throw fail("bad mode") }
            try check(chmod(path(try argument(1)), mode), "chmod")
        case "echo":
            try echo(arguments, fail: fail)
        case "cat":
            try cat(path(try argument(0)), fail: fail)
        default:
            throw fail("unknown command")
        }
        try settle()
        return nil
    }

    /// `watch PATH [op ...]`: joins fsnotify's `Watcher`, as `Add` or `AddWith(WithOps(...))`.
    private func watch(_ given: String, operations: [String], fail: (String) -> Failure) throws {
        // `watch /dir/...` watches the tree; `unwatch /dir` (or `/dir/...`) ends it.
        let recursive = given.hasSuffix("/...")
        let name = recursive ? Self.scriptPath(String(given.dropLast(4))) : given
        var events: DirectoryWatcher.Events = operations.isEmpty ? .default : []
        for operation in operations {
            guard let selected = FsnotifyMapping.selections[operation] else { throw fail("unknown op \(operation)") }
            events.formUnion(selected)
        }
        // fsnotify keeps one watch per path: adding a watched path again changes nothing more.
        if let existing = shared.watcher(name), existing.options.events == events,
            existing.options.recursive == recursive
        {
            return
        }
        if let replaced = shared.remove(name) { replaced.invalidate() }

        let target = path(name)
        var status = stat()
        let isDirectory = stat(target, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
        let mapped = FsnotifyMapping.Watch(path: name, isFile: !isDirectory)
        let options = DirectoryWatcher.Options(events: events, recursive: recursive, backend: backend)
        let handler = handler(for: mapped)
        let watcher: DirectoryWatcher
        do {
            watcher =
                isDirectory
                ? try DirectoryWatcher.watchFolder(path: target, options: options, handler: handler)
                : try DirectoryWatcher.watchFile(path: target, options: options, handler: handler)
        } catch {
            throw fail("\(error)")
        }
        shared.add(watcher, for: name)
    }

    private func handler(for watch: FsnotifyMapping.Watch) -> @Sendable ([DirectoryChange]) -> Void {
        let shared = shared
        let root = directory.path
        return { changes in
            for change in changes {
                guard
                    let events = FsnotifyMapping.events(
                        for: change, by: watch, relative: { Self.relative($0, root: root) },
                        isWatched: shared.isWatched)
                else {
                    shared.fail("\(change) (fsnotify reports it on its error channel)")
                    continue
                }
                shared.record(events)
                if change.kind == .rootRemoved || change.kind == .rootMoved {
                    // The watch is gone, as fsnotify drops it; a later `watch` starts another.
                    _ = shared.remove(watch.path)
                }
            }
        }
    }

    /// `echo DATA >PATH` or `echo DATA >>PATH`: open, write, close, with fsnotify's pauses
    /// (after the open and after the write) as barriers.
    private func echo(_ arguments: [String], fail: (String) -> Failure) throws {
        guard let redirect = arguments.firstIndex(where: { $0.hasPrefix(">") }) else {
            throw fail("expected a redirection")
        }
        let append = arguments[redirect].hasPrefix(">>")
        var target = String(arguments[redirect].dropFirst(append ? 2 : 1))
        if target.isEmpty, redirect + 1 < arguments.count { target = arguments[redirect + 1] }
        guard !target.isEmpty else { throw fail("missing file after the redirection") }
        let data = Array((arguments[..<redirect].joined(separator: " ") + "\n").utf8)
        let fd = open(path(target), O_RDWR | O_CREAT | (append ? O_APPEND : O_TRUNC), 0o666)
        if fd < 0 { throw fail("open: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        fsync(fd)
        try settle()
        let written = data.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        if written != data.count { throw fail("write: \(String(cString: strerror(errno)))") }
        fsync(fd)
        try settle()
    }

    /// `cat PATH`: reads the file to its end and closes it.
    private func cat(_ file: String, fail: (String) -> Failure) throws {
        let fd = open(file, O_RDONLY)
        if fd < 0 { throw fail("open: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 { throw fail("read: \(String(cString: strerror(errno)))") }
            if count == 0 { return }
        }
    }

    private func makeDirectories(_ target: String, fail: (String) -> Failure) throws {
        var prefix = ""
        for component in target.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw fail("mkdir \(prefix): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// `rm PATH`, as Go's `os.Remove`: unlink, or rmdir for a directory.
    private func remove(_ target: String, fail: (String) -> Failure) throws {
        if unlink(target) == 0 { return }
        let unlinkError = errno
        if rmdir(target) == 0 { return }
        throw fail("unlink: \(String(cString: strerror(unlinkError)))")
    }

    /// `rm -r PATH`, as Go's `os.RemoveAll`: contents first, never following symbolic links.
    private func removeTree(_ target: String, fail: (String) -> Failure) throws {
        var status = stat()
        guard lstat(target, &status) == 0 else { return }
        if (status.st_mode & S_IFMT) == S_IFDIR {
            guard let stream = opendir(target) else { throw fail("opendir: \(String(cString: strerror(errno)))") }
            var names: [String] = []
            while let entry = readdir(stream) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                    String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(stream)
            for name in names { try removeTree(target + "/" + name, fail: fail) }
            if rmdir(target) != 0 { throw fail("rmdir: \(String(cString: strerror(errno)))") }
        } else if unlink(target) != 0 {
            throw fail("unlink: \(String(cString: strerror(errno)))")
        }
    }

    // MARK: - Paths and barriers

    /// A script path in the script's directory, as Go's `filepath.Join(tmp, path)`.
    private func path(_ name: String) -> String {
        let trimmed = name.split(separator: "/").joined(separator: "/")
        return trimmed.isEmpty ? directory.path : directory.path + "/" + trimmed
    }

    /// A script path in one spelling (`ab`, `/ab/` and `/ab` are `/ab`), to key the watches.
    static func scriptPath(_ name: String) -> String {
        "/" + name.split(separator: "/").joined(separator: "/")
    }

    /// One of our paths as the script writes it.
    static func relative(_ path: FileSystemPath, root: String) -> String {
        let text = path.description
        if text == root { return "/" }
        if text.hasPrefix(root + "/") { return String(text.dropFirst(root.count)) }
        return text
    }

    /// Returns once every watcher has delivered every change made so far.
    private func settle(also extra: [DirectoryWatcher] = []) throws {
        let watchers = shared.all + extra
        guard !watchers.isEmpty else { return }
        let group = DispatchGroup()
        for watcher in watchers {
            group.enter()
            watcher.barrier { group.leave() }
        }
        if group.wait(timeout: .now() + 20) == .timedOut {
            throw Failure(message: "a barrier did not complete within 20 s")
        }
    }
}
