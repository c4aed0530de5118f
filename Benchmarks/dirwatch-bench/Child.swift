import CBenchSupport
import CInotifyFloor
import DirectoryWatcher
import Dispatch
import Glibc
import Synchronization

/// The watcher side of every measurement, run in a child process (`dirwatch-bench --child MODE
/// …`) so that its CPU time, threads, descriptors and wake-ups are its own and nothing else's.
///
/// Protocol: the child prints `ready cpu=NS` once it watches (its CPU time so far, which the
/// parent subtracts from the total that `wait4` reports), then works until its standard input
/// reaches end of file, then reads what is still queued and prints its counts. With a report pipe
/// on fd 3 it writes each change's CLOCK_MONOTONIC arrival time there, 8 bytes, as it receives it.
enum Child {
    static let reportFD: Int32 = 3

    static func run(_ arguments: [String]) -> Never {
        do throws(BenchError) {
            switch (arguments.first, arguments.count) {
            case ("library-watch", 3), ("library-watch", 4):
                try libraryWatch(
                    directory: arguments[1], reports: arguments[2] == "report", delivery: .automatic,
                    backend: try WatchBackend(arguments.count > 3 ? arguments[3] : nil))
            case ("libraryQueue-watch", 3), ("libraryQueue-watch", 4):
                try libraryWatch(
                    directory: arguments[1], reports: arguments[2] == "report", delivery: .queue,
                    backend: try WatchBackend(arguments.count > 3 ? arguments[3] : nil))
            case ("floor-watch", 3):
                try floorWatch(directory: arguments[1], reports: arguments[2] == "report", handOff: false)
            case ("floor-watch", 4) where arguments[3] == "fanotify":
                try floorWatch(
                    directory: arguments[1], reports: arguments[2] == "report", handOff: false, fanotify: true)
            case ("library-settled", 3):
                try libraryWatch(
                    directory: arguments[1], reports: true, delivery: .automatic,
                    settling: .init(quietPeriod: .milliseconds(Int(arguments[2]) ?? 20)))
            case ("library-settled-content", 3):
                try libraryWatch(
                    directory: arguments[1], reports: true, delivery: .automatic,
                    settling: .init(quietPeriod: .milliseconds(Int(arguments[2]) ?? 20), comparesContent: true))
            case ("floor-closes", 2):
                try floorWatch(directory: arguments[1], reports: true, handOff: false, mask: UInt32(IN_CLOSE_WRITE))
            case ("handoff-watch", 3):
                try floorWatch(directory: arguments[1], reports: arguments[2] == "report", handOff: true)
            case ("library-many", 3):
                try libraryMany(parent: arguments[1], count: Int(arguments[2]) ?? 0, delivery: .automatic)
            case ("libraryQueue-many", 3):
                try libraryMany(parent: arguments[1], count: Int(arguments[2]) ?? 0, delivery: .queue)
            case ("library-slow", 3):
                try librarySlow(parent: arguments[1], count: Int(arguments[2]) ?? 0, delivery: .automatic)
            case ("libraryQueue-slow", 3):
                try librarySlow(parent: arguments[1], count: Int(arguments[2]) ?? 0, delivery: .queue)
            case ("library-snapshot", 2): try librarySnapshot(directory: arguments[1])
            case ("library-state", 3): try libraryState(directory: arguments[1], file: arguments[2])
            case ("library-poll", 3): try libraryPoll(directory: arguments[1], polls: Int(arguments[2]) ?? 1)
            case ("library-poll-idle", 3):
                try libraryPollIdle(directory: arguments[1], intervalMilliseconds: Int(arguments[2]) ?? 100)
            case ("floor-many", 3): try floorMany(parent: arguments[1], count: Int(arguments[2]) ?? 0)
            case ("floor-tree", 2): try floorTree(root: arguments[1])
            case ("library-tree", 2): try libraryTree(root: arguments[1], backend: .inotify)
            case ("library-tree-fanotify", 2): try libraryTree(root: arguments[1], backend: .fanotify)
            default: throw BenchError("unknown child mode: \(arguments.joined(separator: " "))")
            }
        } catch {
            writeAll("dirwatch-bench child: \(error)\n", to: 2)
            exit(1)
        }
        exit(0)
    }

    // MARK: - Watching one directory

    /// Counts what the library delivers; written on the watcher's queue, read after a barrier.
    private final class Tally: Sendable {
        let created = Atomic<Int>(0)
        let overflows = Atomic<Int>(0)
        let changes = Atomic<Int>(0)
    }

    /// How a `*-watch` child watches its directory: with the default options (latency), or with
    /// the backend named after the mode's other arguments (bursts): `inotify`, a plain watcher
    /// forced onto inotify, or `fanotify`, a recursive watcher on fanotify.
    enum WatchBackend {
        case automatic
        case inotify
        case fanotifyTree

        init(_ name: String?) throws(BenchError) {
            switch name {
            case nil: self = .automatic
            case "inotify": self = .inotify
            case "fanotify": self = .fanotifyTree
            case let name?: throw BenchError("unknown backend for a watch child: \(name)")
            }
        }
    }

    /// Starts a watcher that must run on fanotify. A process that may not use fanotify (not
    /// root) is not an error of the benchmark: the child prints `unavailable REASON` and exits, and
    /// the parent reports the fanotify rows as not available. A watcher that starts on another
    /// backend is one (the rows would measure the wrong thing): the child fails.
    private static func fanotifyWatcher(
        path: String, options: DirectoryWatcher.Options, handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(BenchError) -> DirectoryWatcher {
        let watcher: DirectoryWatcher
        do throws(DirectoryWatcherError) {
            watcher = try DirectoryWatcher.watchFolder(path: path, options: options, handler: handler)
        } catch let error where error.code == .backendUnavailable {
            writeAll("unavailable \(error.detail ?? error.reason)\n", to: 1)
            exit(0)
        } catch {
            throw BenchError("library: \(error)")
        }
        guard watcher.backendChoice?.kind == .fanotify else {
            watcher.invalidate()
            throw BenchError(
                "library: asked for fanotify, got \(watcher.backendChoice.map { "\($0)" } ?? "no backend")")
        }
        return watcher
    }

    private static func libraryWatch(
        directory: String, reports: Bool, delivery: DirectoryWatcher.Delivery,
        settling: DirectoryWatcher.Settling? = nil, backend: WatchBackend = .automatic
    ) throws(BenchError) {
        let tally = Tally()
        let watcher: DirectoryWatcher
        do {
            var options = DirectoryWatcher.Options(delivery: delivery, settling: settling)
            switch backend {
            case .automatic: break
            case .inotify: options.backend = .inotify
            case .fanotifyTree:
                options.recursive = true
                options.backend = .fanotify
            }
            let handler: @Sendable ([DirectoryChange]) -> Void = { changes in
                for change in changes {
                    if reports {
                        var now = monotonicNanoseconds()
                        _ = Glibc.write(reportFD, &now, 8)
                    }
                    switch change.kind {
                    case .created: tally.created.add(1, ordering: .relaxed)
                    case .overflow: tally.overflows.add(1, ordering: .relaxed)
                    default: break
                    }
                }
                tally.changes.add(changes.count, ordering: .relaxed)
            }
            if backend == .fanotifyTree {
                watcher = try fanotifyWatcher(path: directory, options: options, handler: handler)
            } else {
                watcher = try DirectoryWatcher.watchFolder(path: directory, options: options, handler: handler)
            }
        } catch let error as BenchError {
            throw error
        } catch {
            throw BenchError("library: \(error)")
        }
        writeAll("ready cpu=\(ownCPUNanoseconds())\n", to: 1)
        waitForEndOfInput()
        // Everything the parent did before closing our input is in the kernel queue by now; the
        // barrier returns once all of it has been delivered.
        let done = DispatchSemaphore(value: 0)
        watcher.barrier { done.signal() }
        done.wait()
        watcher.invalidate()
        writeAll(
            "done created=\(tally.created.load(ordering: .relaxed)) "
                + "overflows=\(tally.overflows.load(ordering: .relaxed)) "
                + "changes=\(tally.changes.load(ordering: .relaxed)) resident=\(residentKiB())\n", to: 1)
    }

    /// `fanotify`: the floor of a fanotify tree, one mark as the library makes it; where this
    /// process may not use fanotify, it prints `unavailable REASON` and exits, as the library's
    /// child does.
    private static func floorWatch(
        directory: String, reports: Bool, handOff: Bool, mask: UInt32 = cif_directory_mask, fanotify: Bool = false
    ) throws(BenchError) {
        let opened = fanotify ? cif_floor_open_fanotify(directory) : cif_floor_open()
        guard let floor = opened else {
            if fanotify && (errno == EPERM || errno == ENOSYS || errno == EINVAL || errno == EXDEV) {
                writeAll("unavailable floor: fanotify: \(String(cString: strerror(errno)))\n", to: 1)
                exit(0)
            }
            throw .system(fanotify ? "floor: fanotify_init or fanotify_mark" : "floor: inotify_init1", directory)
        }
        defer { cif_floor_close(floor) }
        guard fanotify || cif_floor_add_mask(floor, directory, mask) >= 0 else {
            throw .system("floor: inotify_add_watch", directory)
        }
        writeAll("ready cpu=\(ownCPUNanoseconds())\n", to: 1)
        var counts = cif_counts()
        guard cif_floor_run(floor, 0, reports ? reportFD : -1, handOff ? 1 : 0, &counts) == 0 else {
            throw .system("floor: reading")
        }
        writeAll(
            "done created=\(counts.created) overflows=\(counts.overflows) changes=\(counts.events) "
                + "resident=\(residentKiB())\n", to: 1)
    }

    private static func waitForEndOfInput() {
        var byte: UInt8 = 0
        while true {
            let count = read(0, &byte, 1)
            if count == 0 || (count < 0 && errno != EINTR) { return }
        }
    }

    // MARK: - Many watchers

    /// What one process holds: measured before and after watching, the difference is the cost.
    struct Footprint {
        var threads = 0
        var loopThreads = 0
        var descriptors = 0
        var inotifyInstances = 0
        var heapBytes = 0
        var residentBytes = 0

        static func current() -> Footprint {
            var footprint = Footprint()
            for task in directoryEntries("/proc/self/task") {
                footprint.threads += 1
                if readText("/proc/self/task/\(task)/comm")?.hasPrefix("DirWatcher loop") == true {
                    footprint.loopThreads += 1
                }
            }
            var target = [CChar](repeating: 0, count: 64)
            for fd in directoryEntries("/proc/self/fd") {
                footprint.descriptors += 1
                let count = readlink("/proc/self/fd/\(fd)", &target, target.count - 1)
                if count > 0
                    && String(decoding: target[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                        == "anon_inode:inotify"
                {
                    footprint.inotifyInstances += 1
                }
            }
            // The listing of /proc/self/fd holds one descriptor of its own while it runs.
            footprint.descriptors -= 1
            footprint.heapBytes = cbs_heap_bytes_in_use()
            if let statm = readText("/proc/self/statm")?.split(separator: " "), statm.count > 1 {
                footprint.residentBytes = (Int(statm[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
            }
            return footprint
        }

        func line(since before: Footprint, count: Int) -> String {
            "many watched=\(count) threads=\(threads - before.threads) loopThreads=\(loopThreads) "
                + "descriptors=\(descriptors - before.descriptors) inotify=\(inotifyInstances) "
                + "heap=\(heapBytes - before.heapBytes) resident=\(residentBytes - before.residentBytes)\n"
        }
    }

    /// One watcher per directory `parent/0` … `parent/count-1`: the cost of many watchers, and,
    /// until the library watches trees, its cost per watched directory.
    private static func libraryMany(
        parent: String, count: Int, delivery: DirectoryWatcher.Delivery
    ) throws(BenchError) {
        let before = Footprint.current()
        var watchers: [DirectoryWatcher] = []
        watchers.reserveCapacity(count)
        let options = DirectoryWatcher.Options(delivery: delivery)
        for index in 0..<count {
            do {
                watchers.append(try DirectoryWatcher.watchFolder(path: "\(parent)/\(index)", options: options) { _ in })
            } catch {
                throw BenchError("library: \(error)")
            }
        }
        // One delivery round trip, so threads the delivery path starts are counted too.
        let done = DispatchSemaphore(value: 0)
        watchers.last?.barrier { done.signal() }
        done.wait()
        writeAll(Footprint.current().line(since: before, count: count), to: 1)
        for watcher in watchers { watcher.invalidate() }
    }

    /// One watcher per directory, each delegate listing its directory for 2 ms; two bursts of one
    /// new file per directory. Prints the most threads the process had beyond its start, sampled
    /// in every callback.
    private static func librarySlow(
        parent: String, count: Int, delivery: DirectoryWatcher.Delivery
    ) throws(BenchError) {
        let before = directoryEntries("/proc/self/task").count
        let most = Atomic<Int>(0)
        let delivered = Atomic<Int>(0)
        let bursts = 2
        let done = DispatchSemaphore(value: 0)
        let options = DirectoryWatcher.Options(delivery: delivery)
        var watchers: [DirectoryWatcher] = []
        for index in 0..<count {
            let path = "\(parent)/\(index)"
            do {
                watchers.append(
                    try DirectoryWatcher.watchFolder(path: path, options: options) { changes in
                        let start = monotonicNanoseconds()
                        repeat { _ = directoryEntries(path) } while monotonicNanoseconds() - start < 2_000_000
                        let threads = directoryEntries("/proc/self/task").count
                        _ = most.max(threads, ordering: .relaxed)
                        let created = changes.filter { $0.kind == .created }.count
                        if delivered.add(created, ordering: .relaxed).newValue == count * bursts { done.signal() }
                    })
            } catch {
                throw BenchError("library: \(error)")
            }
        }
        let tag = getpid()
        for burst in 0..<bursts {
            for index in 0..<count {
                let fd = open("\(parent)/\(index)/slow-\(tag)-\(burst)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
                guard fd >= 0 else { throw .system("open", "\(parent)/\(index)") }
                close(fd)
            }
        }
        done.wait()
        writeAll("slow watched=\(count) threads=\(most.load(ordering: .relaxed) - before)\n", to: 1)
        for watcher in watchers { watcher.invalidate() }
        for burst in 0..<bursts {
            for index in 0..<count { unlink("\(parent)/\(index)/slow-\(tag)-\(burst)") }
        }
    }

    /// What a kept snapshot costs: a watcher that keeps none, then one that does on the same
    /// directory (its listing is the difference), measured in heap bytes and time.
    private static func librarySnapshot(directory: String) throws(BenchError) {
        let entries = directoryEntries(directory).count
        do {
            let plain = try DirectoryWatcher.watchFolder(path: directory, options: .init(recovery: .notice)) { _ in }
            defer { plain.invalidate() }
            let heap = cbs_heap_bytes_in_use()
            let start = monotonicNanoseconds()
            let exact = try DirectoryWatcher.watchFolder(path: directory, options: .init(recovery: .exact)) { _ in }
            defer { exact.invalidate() }
            let elapsed = monotonicNanoseconds() - start
            settle(exact)
            writeAll("snapshot entries=\(entries) heap=\(cbs_heap_bytes_in_use() - heap) ns=\(elapsed)\n", to: 1)
        } catch {
            throw BenchError("library: \(error)")
        }
    }

    /// What a start from a saved state costs: a state saved by a first watcher, then a second
    /// started from it, timed from the call to the end of its first batch (the state read and
    /// checked, the directory listed once, the two compared; nothing changed, so the batch is
    /// empty and a barrier marks it); and the state file's size.
    private static func libraryState(directory: String, file: String) throws(BenchError) {
        let entries = directoryEntries(directory).count
        let options = DirectoryWatcher.Options(savedState: .init(path: file))
        do {
            let first = try DirectoryWatcher.watchFolder(path: directory, options: options) { _ in }
            first.invalidate()
            let start = monotonicNanoseconds()
            let second = try DirectoryWatcher.watchFolder(path: directory, options: options) { _ in }
            settle(second)
            let elapsed = monotonicNanoseconds() - start
            second.invalidate()
            var status = stat()
            guard stat(file, &status) == 0 else { throw BenchError("library: no state file at \(file)") }
            writeAll("state entries=\(entries) bytes=\(status.st_size) ns=\(elapsed)\n", to: 1)
        } catch let error as BenchError {
            throw error
        } catch {
            throw BenchError("library: \(error)")
        }
    }

    /// What a poll costs: a polled watcher (an hour's interval, so only barriers poll) polled
    /// `polls` times in a row, each barrier a poll of the whole directory; the process's CPU time
    /// per poll.
    private static func libraryPoll(directory: String, polls: Int) throws(BenchError) {
        let entries = directoryEntries(directory).count
        do {
            let watcher = try DirectoryWatcher.watchFolder(
                path: directory, options: .init(backend: .polling, pollingInterval: .seconds(3600))
            ) { _ in }
            defer { watcher.invalidate() }
            settle(watcher)
            let start = ownCPUNanoseconds()
            for _ in 0..<polls { settle(watcher) }
            let perPoll = (ownCPUNanoseconds() - start) / UInt64(max(polls, 1))
            writeAll("poll entries=\(entries) cpu=\(perPoll)\n", to: 1)
        } catch {
            throw BenchError("library: \(error)")
        }
    }

    /// A polled watcher left alone until its input closes, for the parent to count its wake-ups.
    private static func libraryPollIdle(directory: String, intervalMilliseconds: Int) throws(BenchError) {
        let watcher: DirectoryWatcher
        do {
            watcher = try DirectoryWatcher.watchFolder(
                path: directory,
                options: .init(backend: .polling, pollingInterval: .milliseconds(intervalMilliseconds))
            ) { _ in }
        } catch {
            throw BenchError("library: \(error)")
        }
        writeAll("ready\n", to: 1)
        waitForEndOfInput()
        watcher.invalidate()
        writeAll("done\n", to: 1)
    }

    private static func floorMany(parent: String, count: Int) throws(BenchError) {
        let before = Footprint.current()
        guard let floor = cif_floor_open() else { throw .system("floor: inotify_init1") }
        defer { cif_floor_close(floor) }
        for index in 0..<count {
            guard cif_floor_add(floor, "\(parent)/\(index)") >= 0 else {
                throw .system("floor: inotify_add_watch", "\(parent)/\(index)")
            }
        }
        writeAll(Footprint.current().line(since: before, count: count), to: 1)
    }

    // MARK: - Trees

    /// The library's recursive setup, timed from the call to its return; with the heap it added
    /// and the inotify watches. The loop is running already (a plain watcher of the root), as the
    /// floor's inotify descriptor is open before its clock starts. On inotify the call returns
    /// when every directory of the tree is watched and listed; on fanotify, once its one mark is
    /// in place and it has listed what it can of the tree in 10 ms (the rest is listed after
    /// readiness, and `watchedDirectories()` below waits for that, outside the clock).
    private static func libraryTree(root: String, backend: DirectoryWatcher.Backend) throws(BenchError) {
        do {
            let plain = try DirectoryWatcher.watchFolder(path: root, options: .init(recovery: .notice)) { _ in }
            defer { plain.invalidate() }
            // The loop's own: its barrier file's and the plain watcher's.
            let watchesBefore = kernelWatches()
            let heap = cbs_heap_bytes_in_use()
            let options = DirectoryWatcher.Options(recursive: true, backend: backend)
            let start = monotonicNanoseconds()
            let tree =
                backend == .fanotify
                ? try fanotifyWatcher(path: root, options: options) { _ in }
                : try DirectoryWatcher.watchFolder(path: root, options: options) { _ in }
            let elapsed = monotonicNanoseconds() - start
            defer { tree.invalidate() }
            if backend != .fanotify, tree.backendChoice?.kind != .inotify {
                throw BenchError(
                    "library: asked for inotify, got \(tree.backendChoice.map { "\($0)" } ?? "no backend")")
            }
            settle(tree)
            let added = cbs_heap_bytes_in_use() - heap
            let count = tree.watchedDirectories().count - 1
            let watches = kernelWatches() - watchesBefore
            writeAll("tree directories=\(count) ns=\(elapsed) heap=\(added) watches=\(watches)\n", to: 1)
        } catch let error as BenchError {
            throw error
        } catch {
            throw BenchError("library: \(error)")
        }
    }

    /// The kernel watches of all of this process's inotify instances: the `inotify wd:` lines of
    /// their `/proc/self/fdinfo`.
    private static func kernelWatches() -> Int {
        var target = [CChar](repeating: 0, count: 64)
        var watches = 0
        for fd in directoryEntries("/proc/self/fd") {
            let count = readlink("/proc/self/fd/\(fd)", &target, target.count - 1)
            guard count > 0,
                String(decoding: target[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) == "anon_inode:inotify",
                let info = readText("/proc/self/fdinfo/\(fd)")
            else { continue }
            watches += info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
        }
        return watches
    }

    /// Waits for a barrier of `watcher`: the loop has then run every task before it and freed
    /// what they held (the first listing, handed to the loop in a task), so the heap measured
    /// next is what the watcher keeps, the same in every round.
    private static func settle(_ watcher: DirectoryWatcher) {
        let done = DispatchSemaphore(value: 0)
        watcher.barrier { done.signal() }
        done.wait()
    }

    /// The floor's naive recursive setup, timed from the first call to the last watch added.
    private static func floorTree(root: String) throws(BenchError) {
        guard let floor = cif_floor_open() else { throw .system("floor: inotify_init1") }
        defer { cif_floor_close(floor) }
        let start = monotonicNanoseconds()
        let count = cif_floor_add_tree(floor, root)
        let elapsed = monotonicNanoseconds() - start
        guard count >= 0 else { throw .system("floor: watching the tree", root) }
        writeAll("tree directories=\(count) ns=\(elapsed)\n", to: 1)
    }
}
