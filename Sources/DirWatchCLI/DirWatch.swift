import CDirectoryWatcherShims
import DirectoryWatcher
import Dispatch
import Glibc
import Synchronization

/// The `dirwatch` command: parses the arguments, sets up one watcher per directory or file, prints
/// each batch of changes as it arrives.
public enum DirWatch {
    public enum ExitCode {
        public static let success: Int32 = 0
        public static let watchFailed: Int32 = 1
        public static let usage: Int32 = 2
        public static let rootsGone: Int32 = 3
        /// Interrupted, and the `--exec` command had to be killed (SIGKILL) to stop: it outlived
        /// the grace period, or a second signal came.
        public static let commandKilled: Int32 = 4
    }

    /// New blocks of 64 KB and more get pages of their own from the kernel rather than grow the
    /// heap, and are given back as they are freed. glibc's threshold otherwise rises to the largest block freed so far, so once the
    /// kept table's arrays had doubled past it, each array's outgrown block stayed in the heap,
    /// resident and unused (Docs/benchmarks.md, "Outgrown blocks given back"). The command's
    /// choice only: the library leaves its host's allocator alone. A threshold the user set
    /// through glibc's environment stands. Returns whether it set the threshold.
    @discardableResult
    static func keepLargeBlocksApart() -> Bool {
        // strstr, not String's contains: that one is _StringProcessing's, and calling it at
        // start kept 0.6 MB more of the binary's code resident.
        let tunables = getenv("GLIBC_TUNABLES")
        guard getenv("MALLOC_MMAP_THRESHOLD_") == nil, tunables.flatMap({ strstr($0, "mmap_threshold") }) == nil
        else { return false }
        return cdw_set_mmap_threshold(64 * 1024) == 1
    }

    public static func main(_ arguments: [String]) -> Never {
        let options: Options
        do {
            switch try parseArguments(Array(arguments.dropFirst())) {
            case .help:
                writeAll(STDOUT_FILENO, Array((usage + "\n").utf8))
                exit(ExitCode.success)
            case .version:
                writeAll(STDOUT_FILENO, Array((version + "\n").utf8))
                exit(ExitCode.success)
            case .completions(let shell):
                // Scripts/install writes the script to a file: a short write must not pass for one.
                guard writeAll(STDOUT_FILENO, Array(shell.script().utf8)) else {
                    fail("--completions: cannot write the script: \(String(cString: strerror(errno)))", status: 1)
                }
                exit(ExitCode.success)
            case .watch(let parsed):
                options = parsed
            }
        } catch {
            writeError("\(error)\n")
            exit(ExitCode.usage)
        }
        if let program = options.exec?.first,
            CommandRunner.resolve(program, path: getenv("PATH").map { String(cString: $0) }) == nil
        {
            fail("--exec: command not found: '\(program)'", status: ExitCode.usage)
        }

        keepLargeBlocksApart()
        signal(SIGPIPE, SIG_IGN)  // a closed stdout shows up as EPIPE, handled where we write
        // The main thread takes SIGINT and SIGTERM with sigwait, which sees a signal only while
        // every thread blocks it: blocked here, before any thread starts, every thread inherits
        // the mask. (Not Dispatch's signal sources: after dispatchMain() the main thread waits in
        // sigsuspend with every signal unblocked, and a SIGTERM it took there was now and then
        // lost, leaving dirwatch running.)
        var interrupts = sigset_t()
        sigemptyset(&interrupts)
        sigaddset(&interrupts, SIGINT)
        sigaddset(&interrupts, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &interrupts, nil)
        let session = Session(options: options)
        session.start()
        // With --exec, a stop may take the command's grace period: a second signal cuts it short.
        while true {
            var received: Int32 = 0
            if sigwait(&interrupts, &received) == 0 { session.interrupted() }
        }
    }

    static func fail(_ message: String, status: Int32) -> Never {
        writeError("dirwatch: \(message)\n")
        exit(status)
    }
}

/// One run of the command: the watchers, the output, the signal handlers.
///
/// Callbacks run on the library's event-loop thread (`Delivery.eventLoopThread`), as inotifywait
/// writes from its read loop: no hand-off per batch, so dirwatch costs close to a raw inotify
/// loop. When stdout is slow, the kernel's queue holds the changes meanwhile, and if it ever
/// overflows, dirwatch prints an `overflow` line: nothing is dropped silently.
private final class Session: @unchecked Sendable {
    private struct State {
        /// How many watchers there are; nil until every watch is in place. A file's watch ends, and
        /// counts as gone, only with its directory.
        var roots: Int?
        var rootsGone = 0
    }

    private let options: Options
    private let color: Bool
    /// Set in `start()` before the first watcher exists, read only after: the runtime's
    /// exclusivity check on every batch would only cost time.
    @exclusivity(unchecked) private var runner: CommandRunner?
    private var watchers: [DirectoryWatcher] = []
    /// With `--state` into a pipe: each batch is read by the reader before the next is taken.
    private let pipeReading: PipeReading?
    /// Guards the state. Never held across a write: a write may wait for a slow reader, and the
    /// main thread must not wait behind it (it takes the signals).
    private let state = Guarded(State())
    /// Whether dirwatch is stopping (SIGINT, SIGTERM, the end): nothing more is written. Held
    /// across each batch's formatting and write, so a batch is never cut by an exit.
    private let output = Guarded(Output())

    private struct Output {
        var stopping = false
        /// A batch's lines, in storage kept from batch to batch (no allocation a batch).
        var lines = LineBuffer()
    }
    /// A SIGINT or SIGTERM has come. Not under `state`'s lock: a write blocked on a reader that
    /// stopped reading holds it, and a second signal must still end dirwatch.
    private let interruptedOnce = Atomic<Bool>(false)

    init(options: Options) {
        self.options = options
        let noColor = getenv("NO_COLOR").map { $0.pointee != 0 } ?? false
        self.color = !options.json && isatty(STDOUT_FILENO) == 1 && !noColor
        self.pipeReading = options.state == nil ? nil : PipeReading(STDOUT_FILENO)
    }

    func start() {
        if let argv = options.exec {
            let configuration = ExecController.Configuration(
                restart: options.restart, postpone: options.postpone, once: options.once,
                debounce: Double(options.debounceMilliseconds) / 1000, grace: options.grace)
            runner = CommandRunner(argv: argv, configuration: configuration) { status in exit(status) }
        }
        // The library applies the excludes: in a tree, an excluded directory is never watched.
        let settling = options.settle.map { seconds in
            DirectoryWatcher.Settling(
                quietPeriod: .seconds(seconds), maximumWait: options.settleMax.map { .seconds($0) },
                comparesContent: options.compareContent)
        }
        let watchOptions = DirectoryWatcher.Options(
            events: options.events, delivery: .eventLoopThread, recursive: options.recursive,
            excludes: options.excludes, gitignore: options.gitignore, settling: settling,
            backend: options.poll == nil ? options.backend ?? .automatic : .polling,
            pollingInterval: .seconds(options.poll ?? 1),
            savedState: options.state.map {
                DirectoryWatcher.SavedState(path: $0, interval: .milliseconds(Int(options.stateInterval * 1000)))
            })
        // A file given as a PATH is watched as --file watches it, as inotifywait takes files too.
        let targets = options.paths.map { ($0, isRegularFile($0)) } + options.files.map { ($0, true) }
        var seen = Set<WatchKey>()
        for (path, isFile) in targets {
            do throws(DirectoryWatcherError) {
                // The closure forms: the watcher holds its handler strongly, where a delegate is held
                // weakly (a weak reference makes every retain and release of the session slower).
                // The session lives as long as the process.
                let watcher =
                    isFile
                    ? try DirectoryWatcher.watchFile(path: path, options: watchOptions) { self.observe($0) }
                    : try DirectoryWatcher.watchFolder(path: path, options: watchOptions) { self.observe($0) }
                // The same directory or file named twice would print every change twice.
                guard seen.insert(WatchKey(path: watcher.path, isFile: isFile)).inserted else {
                    watcher.invalidate()
                    continue
                }
                watchers.append(watcher)
                // Polling (asked for, or chosen where inotify is blind) and what cannot be seen
                // are the user's to know: otherwise a watch of /proc prints nothing, for ever.
                if let choice = watcher.backendChoice {
                    // A tree's backend decides what it costs and what it needs: said for -r.
                    if options.recursive && choice.kind != .polling && !isFile {
                        writeError(
                            "dirwatch: \(choice.kind == .fanotify ? "fanotify" : "inotify") for \(watcher.path): \(choice.reason)\n"
                        )
                    }
                    if choice.kind == .polling {
                        let every = choice.interval.map { " every \(Self.seconds($0)) s" } ?? ""
                        writeError("dirwatch: polling \(watcher.path)\(every): \(choice.reason)\n")
                    }
                    if let warning = choice.warning { writeError("dirwatch: warning: \(warning)\n") }
                }
            } catch {
                // "No such file" alone would puzzle: a watched file need not exist, its directory must.
                let hint = isFile && error.code == .noSuchPath ? " (the file need not exist; its directory must)" : ""
                DirWatch.fail("\(error)\(hint)", status: DirWatch.ExitCode.watchFailed)
            }
        }
        // A root may already be gone: its change was printed, and counted, before this point.
        let allGone = state.withLock { state -> Bool in
            state.roots = watchers.count
            return state.rootsGone >= watchers.count
        }
        if allGone {
            finish(status: DirWatch.ExitCode.rootsGone)
            return
        }
        writeError("Watches established.\n")
        runner?.start()
    }

    /// A duration in seconds as a person writes it: `1`, `0.25`.
    private static func seconds(_ duration: Duration) -> String {
        let (whole, attoseconds) = duration.components
        if attoseconds == 0 { return String(whole) }
        return String(Double(whole) + Double(attoseconds) / 1e18)
    }

    /// A watch, to leave out the same one asked for twice. (A directory watched as a file, with
    /// --file, reports its entry, not its entries: another watch.)
    private struct WatchKey: Hashable {
        var path: FileSystemPath
        var isFile: Bool
    }

    /// Whether `path` names a regular file, through symbolic links.
    private func isRegularFile(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG
    }

    /// SIGINT, SIGTERM, taken by the main thread: lets the batch being written finish, stops a
    /// running command, exits with status 0 (4 when the command had to be killed). Another
    /// signal while the command is being stopped kills it at once.
    ///
    /// With `--state`, the state is saved first, so that what is printed until then is in it or
    /// comes again; into a pipe, the save waits for the reader to read what was printed. The stop
    /// runs off the main thread, which goes back to waiting for signals: when a write or the save
    /// waits for a reader that has stopped reading, a second signal ends dirwatch at once, unsaved
    /// (what the reader has not read comes again at the next start).
    func interrupted() {
        guard !interruptedOnce.exchange(true, ordering: .relaxed) else {
            if runner == nil { exit(DirWatch.ExitCode.success) }
            finish(status: DirWatch.ExitCode.success)
            return
        }
        DispatchQueue.global().async { [self] in
            if options.state != nil && !output.withLock({ $0.stopping }) {
                for watcher in watchers {
                    do throws(DirectoryWatcherError) {
                        try watcher.saveState()
                    } catch {
                        writeError("dirwatch: \(error)\n")
                    }
                }
            }
            finish(status: DirWatch.ExitCode.success)
        }
    }

    /// Writes nothing more and exits with `status`, once a running command has been stopped.
    private func finish(status: Int32) {
        output.withLock { $0.stopping = true }
        guard let runner else { exit(status) }
        runner.stop { killed in
            exit(killed && status == DirWatch.ExitCode.success ? DirWatch.ExitCode.commandKilled : status)
        }
    }

    /// A batch, from any of the watchers (on the loop's thread: `Delivery.eventLoopThread`).
    func observe(_ changes: [DirectoryChange]) {
        // By index, here and below: `for change in changes` copies each change out (a retain and
        // a release of each of its references), where an element read in place is borrowed.
        var gone = 0
        for index in changes.indices where changes[index].kind == .rootRemoved || changes[index].kind == .rootMoved {
            gone += 1
        }
        let written = output.withLock { output -> (written: Bool, any: Bool)? in
            if output.stopping { return nil }
            guard runner == nil, !changes.isEmpty else { return (true, false) }
            output.lines.removeAll()
            for index in changes.indices {
                if options.json {
                    ChangeFormat.json(changes[index], into: &output.lines)
                } else {
                    ChangeFormat.text(changes[index], color: color, into: &output.lines)
                }
            }
            // One write per batch: the batch is flushed at once, and a closed stdout ends us quietly.
            let written = output.lines.write(to: STDOUT_FILENO, from: 0)
            // A rescan's batch of many thousand lines is not kept for ever.
            if output.lines.capacity > 1 << 20 { output.lines = LineBuffer() }
            return (written, true)
        }
        guard let written else {
            if !changes.isEmpty { runner?.submit(changes) }
            return
        }
        // Delivered once read: until this returns, no state saved counts this batch. (Outside the
        // lock: a stop must not wait for a reader that has stopped reading.)
        if !written.written || (written.any && pipeReading?.waitUntilRead() == false) {
            finish(status: DirWatch.ExitCode.success)
            return
        }
        // Nothing ends dirwatch here (no root gone, no --once): no lock to take.
        guard gone > 0 || options.once else {
            if !changes.isEmpty { runner?.submit(changes) }
            return
        }
        let stopping = output.withLock { $0.stopping }
        let exitStatus = state.withLock { state -> Int32? in
            if stopping { return nil }
            state.rootsGone += gone
            if gone > 0, let roots = state.roots, state.rootsGone >= roots { return DirWatch.ExitCode.rootsGone }
            if options.once && !changes.isEmpty && runner == nil { return DirWatch.ExitCode.success }
            return nil
        }
        if !changes.isEmpty { runner?.submit(changes) }
        if let exitStatus { finish(status: exitStatus) }
    }
}

/// A value behind a lock: the library's futex word (`cdw_lock`, an atomic instruction to lock and
/// one to unlock when uncontended; a batch takes this lock once). Not `Synchronization.Mutex`: on
/// Linux a contended `Mutex` is handed over by the kernel (priority-inheriting futexes), which
/// ThreadSanitizer cannot see, so it reported a race between two accesses made under the lock
/// (the main thread stopping on SIGTERM while the loop's thread wrote a batch). `cdw_lock` hands
/// over through an atomic exchange in user space, which it sees.
final class Guarded<Value>: @unchecked Sendable {
    /// Under the lock, so the runtime's exclusivity check of each access would only cost time.
    @exclusivity(unchecked) private var value: Value
    private let word = UnsafeMutablePointer<cdw_lock>.allocate(capacity: 1)

    init(_ value: Value) {
        self.value = value
        word.initialize(to: cdw_lock())
    }

    deinit {
        word.deallocate()
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        cdw_lock_acquire(word)
        defer { cdw_lock_release(word) }
        return try body(&value)
    }
}
