import CDirectoryWatcherShims
import DirectoryWatcher
import Dispatch
import Glibc

/// Runs `--exec`'s command: argv as given, never through a shell, in a process group of its own.
/// When to run, with what, and when to stop a run is ``ExecController``'s call; this does the
/// system calls, on one queue.
///
/// dirwatch is a child subreaper: a process a run starts that leaves the run's group or session
/// (`setsid`, a daemon's double fork) is still below dirwatch, and becomes its child when its
/// parent ends, so a stop reaches every process of the run (``ProcessTree``), and dirwatch reaps
/// them all. Runs never overlap, so every process below dirwatch is the current run's.
///
/// Each run gets its batch in full as JSON lines on stdin, and its paths in the environment
/// (``ExecEnvironment``) when they fit there.
final class CommandRunner: ExecHost, @unchecked Sendable {
    private let argv: [String]
    private let queue = DispatchQueue(label: "dirwatch.exec")
    private let finished: @Sendable (Int32) -> Void
    private var controller: ExecController!

    // On `queue`.
    /// The runs' first processes that have not been reaped, and their stdin.
    private var feeders: [pid_t: StdinFeeder] = [:]
    private var whenStopped: (@Sendable (Bool) -> Void)?
    /// The reaper waits on it while dirwatch has no child; each launch signals it.
    private let childStarted = DispatchSemaphore(value: 0)

    /// `finished` is called with `once` when the one run has ended, with its exit status (128 +
    /// signal when a signal ended it).
    init(argv: [String], configuration: ExecController.Configuration, finished: @escaping @Sendable (Int32) -> Void) {
        self.argv = argv
        self.finished = finished
        controller = ExecController(configuration: configuration, host: self, scheduler: QueueScheduler(queue: queue))
        if cdw_become_child_subreaper() != 0 {
            let reason = String(cString: strerror(errno))
            writeError(
                "dirwatch: warning: --exec: a process that leaves the command's group may outlive it: \(reason)\n"
            )
        }
        DispatchQueue(label: "dirwatch.reaper").async { [self] in reap() }
    }

    /// Where `program` would be found: itself when it names a path, else the first executable
    /// file of that name in `PATH`. Nil when there is none.
    static func resolve(_ program: String, path: String?) -> String? {
        if program.contains("/") { return access(program, X_OK) == 0 ? program : nil }
        for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(
            separator: ":", omittingEmptySubsequences: false)
        {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + program
            var info = stat()
            if stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG, access(candidate, X_OK) == 0 {
                return candidate
            }
        }
        return nil
    }

    /// Once the watches are in place.
    func start() {
        queue.async { [self] in controller.start() }
    }

    func submit(_ changes: [DirectoryChange]) {
        queue.async { [self] in controller.submit(changes) }
    }

    /// Stops the run that goes, if any, then calls `completion` (on the runner's queue) with
    /// whether it had to be killed. Called again meanwhile, it kills the run at once; the first
    /// completion stands.
    func stop(_ completion: @escaping @Sendable (Bool) -> Void) {
        queue.async { [self] in
            if whenStopped == nil { whenStopped = completion }
            controller.stop()
        }
    }

    // MARK: ExecHost, on `queue`

    func stopped(killed: Bool) {
        whenStopped?(killed)
    }

    func onceFinished(status: Int32) {
        finished(status)
    }

    func signal(_ pid: pid_t, _ signal: Int32) {
        // The pid is not reaped until `exited` runs on this queue, so the group is still this run's.
        _ = kill(-pid, signal)
        // Each process that left the group (once: a second SIGTERM would run a trap twice),
        // parents first. For SIGKILL, read again until none is left: a process forking meanwhile
        // has a child the first reading missed.
        var rounds = 0
        while true {
            let processes = ProcessTree.descendants(of: getpid())
            for process in processes where process.group != pid || signal == SIGKILL { _ = kill(process.pid, signal) }
            rounds += 1
            if signal != SIGKILL || processes.isEmpty || rounds == 100 { return }
        }
    }

    func launch(_ batch: ExecBatch) -> pid_t? {
        var input: [UInt8] = []
        for change in batch.changes { ChangeFormat.json(change, into: &input) }
        var inherited: [String] = []
        var entry = cdw_environ()
        while let current = entry, let pointer = current.pointee {
            inherited.append(String(cString: pointer))
            entry = current + 1
        }
        let environment = ExecEnvironment.variables(
            inherited: inherited, argv: argv, paths: batch.paths, totalLimit: ExecEnvironment.totalLimit)
        switch spawn(environment: environment) {
        case .success(let (pid, stdin)):
            feeders[pid] = StdinFeeder(fd: stdin, bytes: input, queue: queue)
            childStarted.signal()
            return pid
        case .failure(let error):
            writeError("dirwatch: cannot run '\(argv[0])': \(String(cString: strerror(error.code)))\n")
            return nil
        }
    }

    /// On a thread of its own, for ever: waits until a child has ended, without reaping it
    /// (WNOWAIT), and has it reaped on the queue, so that until the controller knows, a run's pid
    /// and group cannot be reused. With no child, waits for the next launch.
    private func reap() {
        while true {
            let pid = cdw_wait_for_a_child()
            if pid > 0 {
                queue.sync { reaped(pid) }
            } else if errno == ECHILD {
                childStarted.wait()
            }
        }
    }

    /// On the queue: reaps `pid`, a run's first process or one it left behind.
    private func reaped(_ pid: pid_t) {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        if let feeder = feeders.removeValue(forKey: pid) {
            feeder.close()
            let code = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
            controller.exited(pid, status: code, othersRemain: cdw_has_children() != 0)
        } else if feeders.isEmpty && cdw_has_children() == 0 {
            controller.othersEnded()
        }
    }

    /// posix_spawnp in a new process group with default signal handling (dirwatch ignores SIGPIPE,
    /// and ignored signals would otherwise be inherited), stdin from a pipe whose write end is
    /// returned.
    private func spawn(environment: [String]) -> Result<(pid_t, Int32), SpawnError> {
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else { return .failure(SpawnError(code: errno)) }
        // Only the child's stdin (a dup2 copy, which does not inherit the flag) may outlive exec.
        for fd in pipeFDs { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[0], STDIN_FILENO)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigfillset(&defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var pid: pid_t = 0
        let result = withCStrings(argv) { argvPointers in
            withCStrings(environment) { environmentPointers in
                posix_spawnp(&pid, argv[0], &actions, &attributes, argvPointers, environmentPointers)
            }
        }
        close(pipeFDs[0])
        guard result == 0 else {
            close(pipeFDs[1])
            return .failure(SpawnError(code: result))
        }
        return .success((pid, pipeFDs[1]))
    }
}

/// The environment of a run: dirwatch's own, with `DIRWATCH_COUNT` (how many paths the batch
/// has) and, when it fits, `DIRWATCH_PATHS` (them, one per line, escaped as the text output
/// escapes them). Inherited values of either are dropped.
///
/// It fits when `DIRWATCH_PATHS=…` is under the kernel's limit for one string (MAX_ARG_STRLEN,
/// 128 KiB with its NUL; past it execve fails with E2BIG) and argv and the environment, it
/// included, take at most ``totalLimit``. Otherwise it is unset: the batch is on stdin in full.
enum ExecEnvironment {
    static let stringLimit = 128 * 1024

    /// Half of ARG_MAX (the room execve has for argv and the environment, strings and pointers),
    /// so that what the command runs in turn, with the same environment, still has room.
    static let totalLimit = max(Int(sysconf(Int32(_SC_ARG_MAX))), 2 * stringLimit) / 2

    static func variables(inherited: [String], argv: [String], paths: [FileSystemPath], totalLimit: Int) -> [String] {
        var environment = inherited.filter { !$0.hasPrefix("DIRWATCH_PATHS=") && !$0.hasPrefix("DIRWATCH_COUNT=") }
        environment.append("DIRWATCH_COUNT=\(paths.count)")
        var variable = Array("DIRWATCH_PATHS=".utf8)
        for (index, path) in paths.enumerated() {
            if index > 0 { variable.append(UInt8(ascii: "\n")) }
            Escaping.text(path, into: &variable)
            if variable.count >= stringLimit { return environment }
        }
        // Each string with its NUL, and a pointer to it.
        let size = (argv + environment).reduce(variable.count + 1 + 8) { $0 + $1.utf8.count + 1 + 8 }
        if size <= totalLimit { environment.append(String(decoding: variable, as: UTF8.self)) }
        return environment
    }
}

/// Feeds a run's stdin without ever blocking the runner: the pipe's write end is non-blocking and
/// written whenever it has room, so a command that never reads its stdin holds up nothing (a
/// pipe takes 64 KiB; a batch can be megabytes). A command that closes its stdin ends the feed
/// (EPIPE: dirwatch ignores SIGPIPE). On the runner's queue.
private final class StdinFeeder {
    private let fd: Int32
    private let bytes: [UInt8]
    private var offset = 0
    private var source: DispatchSourceWrite?
    private var isClosed = false

    init(fd: Int32, bytes: [UInt8], queue: DispatchQueue) {
        self.fd = fd
        self.bytes = bytes
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        guard writeSome() else {
            close()
            return
        }
        let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { [weak self] in
            guard let self, !writeSome() else { return }
            close()
        }
        // The descriptor is closed only once the source lets go of it.
        source.setCancelHandler { [fd] in _ = Glibc.close(fd) }
        self.source = source
        source.resume()
    }

    /// Writes what the pipe takes; true while there is more to write and the pipe is open.
    private func writeSome() -> Bool {
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written > 0 {
                offset += written
            } else if written < 0 && errno == EINTR {
                continue
            } else {
                return written < 0 && errno == EAGAIN
            }
        }
        return false
    }

    /// Ends the feed, written or not: the whole batch, EPIPE, or the run's end.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        if let source { source.cancel() } else { _ = Glibc.close(fd) }
    }
}

/// ``ExecScheduler`` on a Dispatch queue.
struct QueueScheduler: ExecScheduler {
    let queue: DispatchQueue

    func after(_ seconds: Double, _ work: @escaping @Sendable () -> Void) {
        queue.asyncAfter(deadline: .now() + seconds, execute: work)
    }
}

struct SpawnError: Error {
    var code: Int32
}

/// Calls `body` with a NULL-terminated C array of the strings.
private func withCStrings<Result>(
    _ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Result
) -> Result {
    let pointers = strings.map { strdup($0) } + [nil]
    defer { pointers.forEach { free($0) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// Writes every byte, retrying on EINTR and short writes. False on any other error (EPIPE).
@discardableResult
func writeAll(_ fd: Int32, _ bytes: [UInt8], from start: Int = 0) -> Bool {
    bytes.withUnsafeBytes { writeAll(fd, UnsafeRawBufferPointer(rebasing: $0[start...])) }
}

/// ``writeAll(_:_:from:)`` for bytes in place.
@discardableResult
func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
    var offset = 0
    while offset < buffer.count {
        let written = cdw_write(fd, buffer.baseAddress! + offset, buffer.count - offset)
        if written < 0 {
            if errno == EINTR { continue }
            return false
        }
        offset += written
    }
    return true
}

func writeError(_ message: String) {
    writeAll(STDERR_FILENO, Array(message.utf8))
}
