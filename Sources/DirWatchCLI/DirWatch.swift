import DirectoryWatcher
import Dispatch
import Glibc

/// The `dirwatch` command: parses the arguments, sets up one watcher per directory, prints each
/// batch of changes as it arrives.
public enum DirWatch {
    public enum ExitCode {
        public static let success: Int32 = 0
        public static let watchFailed: Int32 = 1
        public static let usage: Int32 = 2
        public static let rootsGone: Int32 = 3
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
            case .watch(let parsed):
                options = parsed
            }
        } catch {
            writeError("\(error)\n")
            exit(ExitCode.usage)
        }
        // Never silently: options that need library features still to come say so.
        if options.recursive {
            fail(
                "--recursive is not available yet: the library does not watch subdirectories so far; "
                    + "name each directory to watch", status: ExitCode.usage)
        }
        if options.settle != nil {
            fail(
                "--settle is not available yet: the library does not settle batches so far; "
                    + "batches are delivered as soon as they are read", status: ExitCode.usage)
        }
        if let program = options.exec?.first,
            CommandRunner.resolve(program, path: getenv("PATH").map { String(cString: $0) }) == nil
        {
            fail("--exec: command not found: '\(program)'", status: ExitCode.usage)
        }

        signal(SIGPIPE, SIG_IGN)  // a closed stdout shows up as EPIPE, handled where we write
        let session = Session(options: options)
        session.start()
        dispatchMain()
    }

    static func fail(_ message: String, status: Int32) -> Never {
        writeError("dirwatch: \(message)\n")
        exit(status)
    }
}

/// One run of the command: the watchers, the output, the signal handlers.
private final class Session: DirectoryWatcherDelegate, @unchecked Sendable {
    private let options: Options
    private let exclude: ExcludeFilter
    private let color: Bool
    /// Every watcher delivers here, so output from several directories never interleaves.
    private let output = DispatchQueue(label: "dirwatch.output")
    private var runner: CommandRunner?
    private var watchers: [DirectoryWatcher] = []
    private var signalSources: [any DispatchSourceSignal] = []

    // On `output`.
    private var liveRoots = 0
    private var sawBatch = false

    init(options: Options) {
        self.options = options
        self.exclude = ExcludeFilter(options.excludes)
        let noColor = getenv("NO_COLOR").map { $0.pointee != 0 } ?? false
        self.color = !options.json && isatty(STDOUT_FILENO) == 1 && !noColor
    }

    func start() {
        if let argv = options.exec {
            let once = options.once
            runner = CommandRunner(argv: argv, restart: options.restart) { status in
                if once { exit(status) }
            }
        }
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .main)
            source.setEventHandler { [self] in stop(status: DirWatch.ExitCode.success) }
            source.resume()
            signalSources.append(source)
        }
        // Set up on the output queue, where batches are delivered: none is handled before every
        // watch exists and `liveRoots` is right.
        output.sync {
            var seen = Set<FileSystemPath>()
            for path in options.paths {
                do {
                    let watcher = try DirectoryWatcher.watchFolder(path: path, delegate: self, queue: output)
                    // The same directory named twice would print every change twice.
                    guard seen.insert(watcher.path).inserted else {
                        watcher.invalidate()
                        continue
                    }
                    watchers.append(watcher)
                } catch {
                    DirWatch.fail("\(error)", status: DirWatch.ExitCode.watchFailed)
                }
            }
            liveRoots = watchers.count
        }
        writeError("Watches established.\n")
    }

    /// Lets the batch being written finish, stops a running command, and exits.
    private func stop(status: Int32) -> Never {
        output.sync {}
        runner?.terminate()
        exit(status)
    }

    func directoryDidChange(_ watcher: DirectoryWatcher) {}

    func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) {
        let kept = changes.filter { !exclude.excludes($0, under: watcher.path) }
        let rootsGone = changes.filter { $0.kind == .rootRemoved || $0.kind == .rootMoved }.count
        liveRoots -= rootsGone
        if !kept.isEmpty {
            if let runner {
                runner.submit(kept)
            } else {
                var bytes: [UInt8] = []
                bytes.reserveCapacity(kept.count * 80)
                for change in kept {
                    if options.json {
                        ChangeFormat.json(change, into: &bytes)
                    } else {
                        ChangeFormat.text(change, color: color, into: &bytes)
                    }
                }
                // One write per batch: the batch is flushed at once, and a closed stdout ends us quietly.
                if !writeAll(STDOUT_FILENO, bytes) { exit(DirWatch.ExitCode.success) }
            }
        }
        if liveRoots <= 0 && rootsGone > 0 {
            runner?.terminate()
            exit(DirWatch.ExitCode.rootsGone)
        }
        if options.once && !kept.isEmpty && runner == nil {
            exit(DirWatch.ExitCode.success)
        }
    }
}
