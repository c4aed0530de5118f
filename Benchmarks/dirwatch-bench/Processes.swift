import Dispatch
import Glibc
import Synchronization

/// The failure of a step of the benchmark, with what it was doing.
struct BenchError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }

    /// `function` failed with the current `errno`.
    static func system(_ function: String, _ subject: String = "") -> BenchError {
        let reason = String(cString: strerror(errno))
        return BenchError(subject.isEmpty ? "\(function): \(reason)" : "\(function) \(subject): \(reason)")
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine, so a child's
/// timestamp and the parent's can be subtracted.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

func sleep(seconds: Double) {
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
    var remaining = timespec()
    while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
}

/// User plus system time in nanoseconds, of all threads (dead ones too).
func cpuNanoseconds(_ usage: rusage) -> UInt64 {
    func nanoseconds(_ time: timeval) -> UInt64 { UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_usec) * 1000 }
    return nanoseconds(usage.ru_utime) + nanoseconds(usage.ru_stime)
}

func ownCPUNanoseconds() -> UInt64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return cpuNanoseconds(usage)
}

/// Writes all of `text` to `fd`.
func writeAll(_ text: String, to fd: Int32) {
    var bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if written < 0 && errno == EINTR { continue }
        if written <= 0 { return }
        offset += written
    }
}

/// A process the benchmark started, with pipes to its standard input (its "stop" signal: end of
/// file), its standard output (one line per message) and optionally a report pipe on its fd 3.
final class ChildProcess {
    let pid: pid_t
    let name: String
    private var control: Int32
    private let output: Int32
    /// Read end of the child's fd 3, where latency timestamps arrive (8 bytes each).
    let reports: Int32
    private var buffered: [UInt8] = []
    private(set) var finished = false
    private var counter: LineCounter?

    /// Starts `executable` with `arguments` (argv[0] included). With `mergeStandardError`, the
    /// child's stderr goes into the same pipe as its stdout (tools that report there).
    init(
        name: String, executable: String, arguments: [String], reports wantsReports: Bool = false,
        mergeStandardError: Bool = false, environment: [String]? = nil
    ) throws(BenchError) {
        self.name = name
        func makePipe() throws(BenchError) -> (read: Int32, write: Int32) {
            var ends: [Int32] = [0, 0]
            guard pipe(&ends) == 0 else { throw .system("pipe") }
            // Close-on-exec, so only the ends dup2'd below reach the child (the parent starts
            // children from one thread, so no other spawn can see them in between).
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            return (ends[0], ends[1])
        }
        let input = try makePipe()
        let output = try makePipe()
        let report = wantsReports ? try makePipe() : nil
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on the copies; every other end closes at exec.
        posix_spawn_file_actions_adddup2(&actions, input.read, 0)
        posix_spawn_file_actions_adddup2(&actions, output.write, 1)
        if mergeStandardError { posix_spawn_file_actions_adddup2(&actions, output.write, 2) }
        if let report { posix_spawn_file_actions_adddup2(&actions, report.write, 3) }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var child = pid_t()
        let result: Int32
        if let environment {
            var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
            defer { for variable in envp { free(variable) } }
            result = posix_spawnp(&child, executable, &actions, nil, &argv, &envp)
        } else {
            result = posix_spawnp(&child, executable, &actions, nil, &argv, environ)
        }
        close(input.read)
        close(output.write)
        if let report { close(report.write) }
        guard result == 0 else {
            close(input.write)
            close(output.read)
            if let report { close(report.read) }
            throw BenchError("cannot start \(name) (\(executable)): \(String(cString: strerror(result)))")
        }
        pid = child
        control = input.write
        self.output = output.read
        reports = report?.read ?? -1
    }

    /// The next line of the child's output, without its newline; nil at end of file.
    func readLine() -> String? {
        while true {
            if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffered[..<newline], as: UTF8.self)
                buffered.removeFirst(newline + 1)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { read(output, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                if buffered.isEmpty { return nil }
                defer { buffered = [] }
                return String(decoding: buffered, as: UTF8.self)
            }
            buffered += chunk[..<count]
        }
    }

    /// Reads lines until one contains `marker`; throws at the end of the output.
    func expectLine(containing marker: String) throws(BenchError) -> String {
        while let line = readLine() {
            if line.contains(marker) { return line }
        }
        throw BenchError("\(name) exited before printing \"\(marker)\"")
    }

    /// Counts, on a thread of its own, the output lines that contain `marker` from now until the
    /// child exits: a peer that prints a line per change must never block on a full pipe (it would
    /// stop reading its own inotify queue) while the parent is busy making the load.
    func countLines(containing marker: String) -> LineCounter {
        let counter = LineCounter(marker: Array(marker.utf8), fd: output, pending: buffered)
        buffered = []
        self.counter = counter
        return counter
    }

    /// Reads one timestamp from the report pipe.
    func readReport() throws(BenchError) -> UInt64 {
        var value: UInt64 = 0
        var got = 0
        while got < 8 {
            let count = withUnsafeMutableBytes(of: &value) { read(reports, $0.baseAddress! + got, 8 - got) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw BenchError("\(name) closed its report pipe") }
            got += count
        }
        return value
    }

    /// Closes the child's standard input: the benchmark's children take that as "stop".
    func closeControl() {
        if control >= 0 { close(control) }
        control = -1
    }

    /// Waits for the child to exit; its resource usage, all threads included.
    func wait() throws(BenchError) -> rusage {
        closeControl()
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) == -1 {
            guard errno == EINTR else { throw .system("wait4", name) }
        }
        finished = true
        counter?.waitForEnd()
        close(output)
        if reports >= 0 { close(reports) }
        // WIFEXITED / WEXITSTATUS are macros Swift does not import.
        let signal = status & 0x7f
        let code = (status >> 8) & 0xff
        // A peer stopped with SIGTERM ends that way by design.
        guard (signal == 0 && code == 0) || signal == SIGTERM else {
            throw BenchError("\(name) failed (exit status \(code), signal \(signal))")
        }
        return usage
    }

    /// Waits for a short-lived helper (a version check, a build) and returns its exit code.
    func exitStatus() throws(BenchError) -> Int32 {
        closeControl()
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { throw .system("waitpid", name) }
        }
        finished = true
        close(output)
        guard status & 0x7f == 0 else { throw BenchError("\(name) was killed by signal \(status & 0x7f)") }
        return (status >> 8) & 0xff
    }

    /// Asks a peer that has no "stop" input to stop (SIGTERM), then waits.
    func terminate() throws(BenchError) -> rusage {
        kill(pid, SIGTERM)
        return try wait()
    }

    deinit {
        if !finished {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            close(output)
            if reports >= 0 { close(reports) }
        }
        closeControl()
    }
}

/// Counts a child's output lines that contain a marker, on a dispatch thread, until end of file.
final class LineCounter: Sendable {
    private let matched = Atomic<Int>(0)
    private let ended = DispatchSemaphore(value: 0)

    var count: Int { matched.load(ordering: .relaxed) }

    fileprivate init(marker: [UInt8], fd: Int32, pending: [UInt8]) {
        DispatchQueue.global().async { [self] in
            var line = pending
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            func take(_ bytes: ArraySlice<UInt8>) {
                for byte in bytes {
                    if byte != UInt8(ascii: "\n") {
                        line.append(byte)
                        continue
                    }
                    if line.count >= marker.count
                        && (0...(line.count - marker.count)).contains(where: {
                            line[$0..<$0 + marker.count].elementsEqual(marker)
                        })
                    {
                        matched.add(1, ordering: .relaxed)
                    }
                    line.removeAll(keepingCapacity: true)
                }
            }
            let start = line
            line = []
            take(start[...])
            while true {
                let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                take(chunk[..<count])
            }
            ended.signal()
        }
    }

    /// Waits until `count` reaches `target` or has not moved for `stall` seconds; the count.
    func wait(for target: Int, stall: Double) -> Int {
        var last = count
        var quietSince = monotonicNanoseconds()
        while count < target {
            sleep(seconds: 0.01)
            let now = count
            if now != last {
                last = now
                quietSince = monotonicNanoseconds()
            } else if Double(monotonicNanoseconds() - quietSince) / 1e9 > stall {
                break
            }
        }
        return count
    }

    fileprivate func waitForEnd() { ended.wait() }
}

/// Context switches of every thread of a process, read from /proc: each one is a wake-up.
struct ContextSwitches {
    /// Per thread id: voluntary plus involuntary switches.
    let perThread: [Int32: UInt64]

    init(pid: pid_t) {
        var counts: [Int32: UInt64] = [:]
        for task in directoryEntries("/proc/\(pid)/task") {
            guard let tid = Int32(task), let status = readText("/proc/\(pid)/task/\(task)/status") else { continue }
            var total: UInt64 = 0
            // "voluntary_ctxt_switches:\t12" and "nonvoluntary_ctxt_switches:\t3"
            for line in status.split(separator: "\n") where line.contains("ctxt_switches:") {
                total += UInt64(String(line.filter(\.isNumber))) ?? 0
            }
            counts[tid] = total
        }
        perThread = counts
    }

    /// Wake-ups between `earlier` and `self`: growth of surviving threads, all switches of new
    /// threads, and one for each thread that exited (it had to wake up to exit).
    func wakeUps(since earlier: ContextSwitches) -> UInt64 {
        var total: UInt64 = 0
        for (tid, count) in perThread { total += count - (earlier.perThread[tid] ?? 0) }
        total += UInt64(earlier.perThread.keys.filter { perThread[$0] == nil }.count)
        return total
    }
}

/// The names in a directory, without "." and "..".
func directoryEntries(_ path: String) -> [String] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) {
            String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

/// The resident memory of process `pid` ("self": this one) in KiB, from /proc/PID/statm; 0 if
/// it cannot be read (the process is gone).
func residentKiB(_ pid: String = "self") -> Int {
    guard let statm = readText("/proc/\(pid)/statm")?.split(separator: " "), statm.count > 1 else { return 0 }
    return (Int(statm[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
}

/// A small text file (/proc), or nil.
func readText(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { break }
        bytes += chunk[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}
