import CDirectoryWatcherShims
import DirectoryWatcher
import Dispatch
import Glibc

/// Runs `--exec`'s command after each batch: argv as given, never through a shell, one run at a
/// time. Changes that arrive during a run are kept for the next one; with `restart`, a run still
/// going is stopped first (SIGTERM to its process group, as `entr -r` does).
///
/// Each run gets the batch as JSON lines on stdin and the changed paths, one per line and escaped
/// as in the text output, in `DIRWATCH_PATHS`.
final class CommandRunner: @unchecked Sendable {
    private let argv: [String]
    private let restart: Bool
    private let queue = DispatchQueue(label: "dirwatch.exec")
    /// Called on the runner's queue when a run ends, with its exit status (128 + signal if killed).
    private let finished: @Sendable (Int32) -> Void

    // On `queue`.
    private var running: pid_t?
    private var stopping = false
    private var pending: [DirectoryChange] = []

    init(argv: [String], restart: Bool, finished: @escaping @Sendable (Int32) -> Void) {
        self.argv = argv
        self.restart = restart
        self.finished = finished
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

    func submit(_ changes: [DirectoryChange]) {
        queue.async { [self] in
            pending += changes
            if let running {
                if restart && !stopping {
                    stopping = true
                    kill(-running, SIGTERM)
                }
            } else {
                startNext()
            }
        }
    }

    /// Stops a run in progress and waits for it to end.
    func terminate() {
        let pid: pid_t? = queue.sync {
            pending = []
            return running
        }
        guard let pid else { return }
        kill(-pid, SIGTERM)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }

    private func startNext() {
        guard !pending.isEmpty else { return }
        let batch = pending
        pending = []
        var input: [UInt8] = []
        var paths: [UInt8] = []
        for change in batch {
            ChangeFormat.json(change, into: &input)
            if !paths.isEmpty { paths.append(UInt8(ascii: "\n")) }
            Escaping.text(change.path, into: &paths)
        }
        switch spawn(environment: ["DIRWATCH_PATHS=" + String(decoding: paths, as: UTF8.self)], input: input) {
        case .success(let pid):
            running = pid
            DispatchQueue.global().async { [self] in
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                let code = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
                queue.async { [self] in
                    running = nil
                    stopping = false
                    finished(code)
                    startNext()
                }
            }
        case .failure(let error):
            writeError("dirwatch: cannot run '\(argv[0])': \(String(cString: strerror(error.code)))\n")
            finished(127)
        }
    }

    /// posix_spawnp in a new process group with default signal handling (dirwatch ignores SIGPIPE,
    /// and ignored signals would otherwise be inherited), stdin from a pipe fed with `input`.
    private func spawn(environment extra: [String], input: [UInt8]) -> Result<pid_t, SpawnError> {
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

        var environment: [String] = []
        var entry = cdw_environ()
        while let current = entry, let pointer = current.pointee {
            let variable = String(cString: pointer)
            if !variable.hasPrefix("DIRWATCH_PATHS=") { environment.append(variable) }
            entry = current + 1
        }
        environment += extra

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
        // Feed stdin from another thread: a command that never reads it must not block dirwatch.
        let writeEnd = pipeFDs[1]
        DispatchQueue.global().async {
            _ = writeAll(writeEnd, input)
            close(writeEnd)
        }
        return .success(pid)
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
func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += written
        }
        return true
    }
}

func writeError(_ message: String) {
    writeAll(STDERR_FILENO, Array(message.utf8))
}
