import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// A fresh directory under the system's temporary directory, removed with everything in it.
final class TemporaryDirectory: Sendable {
    let path: String

    init(in parent: String = NSTemporaryDirectory()) {
        var template = Array((parent + "DirectoryWatcherTests.XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed: \(String(cString: strerror(errno)))")
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    func url(_ name: String) -> String { path + "/" + name }

    /// Creates (or truncates) a file, like `touch`, and returns its path.
    @discardableResult
    func touch(_ name: String) -> String {
        let file = url(name)
        let fd = open(file, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
        precondition(fd >= 0, "open \(file): \(String(cString: strerror(errno)))")
        close(fd)
        return file
    }

    func write(_ name: String, _ text: String) {
        let fd = open(url(name), O_WRONLY | O_APPEND)
        precondition(fd >= 0)
        var bytes = Array(text.utf8)
        precondition(Glibc.write(fd, &bytes, bytes.count) == bytes.count)
        close(fd)
    }

    @discardableResult
    func mkdir(_ name: String) -> String {
        let dir = url(name)
        precondition(Glibc.mkdir(dir, 0o755) == 0, "mkdir \(dir): \(String(cString: strerror(errno)))")
        return dir
    }
}

/// A value shared between a test and callbacks on other threads.
final class LockedValue<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.withLock { value } }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
    func update(_ body: (inout Value) -> Void) { lock.withLock { body(&value) } }
}

/// A delegate that records every batch, thread-safely, and can run a hook on each one.
final class Recorder: DirectoryWatcherDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [DirectoryChange] = []
    private var batchCount = 0
    private var didChangeCalls = 0
    private var batchHook: (@Sendable (DirectoryWatcher, [DirectoryChange]) -> Void)?
    /// Runs inside `didObserve`, on the watcher's queue. Under the lock: tests set it after the
    /// watch has started, and what orders that before a delivery is the kernel, which
    /// ThreadSanitizer cannot see.
    var onBatch: (@Sendable (DirectoryWatcher, [DirectoryChange]) -> Void)? {
        get { lock.withLock { batchHook } }
        set { lock.withLock { batchHook = newValue } }
    }

    /// Sets ``onBatch`` to run `body` on the first batch only; later batches are just recorded.
    func onFirstBatch(_ body: @escaping @Sendable (DirectoryWatcher, [DirectoryChange]) -> Void) {
        let first = LockedValue(true)
        onBatch = { watcher, changes in
            guard first.get() else { return }
            first.set(false)
            body(watcher, changes)
        }
    }

    var changes: [DirectoryChange] { lock.withLock { recorded } }
    var batches: Int { lock.withLock { batchCount } }
    var didChangeCount: Int { lock.withLock { didChangeCalls } }

    func directoryDidChange(_ watcher: DirectoryWatcher) {
        lock.withLock { didChangeCalls += 1 }
    }

    func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) {
        lock.withLock {
            recorded += changes
            batchCount += 1
        }
        onBatch?(watcher, changes)
    }

    func reset() {
        lock.withLock { recorded = [] }
    }
}

extension XCTestCase {
    /// Waits, through the library's barrier, until every change made so far has been delivered.
    func waitForDelivery(_ watcher: DirectoryWatcher, file: StaticString = #filePath, line: UInt = #line) {
        let delivered = expectation(description: "barrier of \(watcher.path)")
        watcher.barrier { delivered.fulfill() }
        // A bound for a hang, not a latency: a kernel-sized rescan under a sanitizer on a busy machine
        // took more than 20 s.
        wait(for: [delivered], timeout: 180)
    }
}

extension DirectoryChange {
    /// Test shorthand: a change with absolute paths from strings.
    init(_ kind: Kind, _ path: String, from oldPath: String? = nil, directory: Bool = false) {
        self.init(
            kind: kind, path: FileSystemPath(path), oldPath: oldPath.map { FileSystemPath($0) }, isDirectory: directory)
    }
}

/// Records the timeouts the event loop sleeps with (`epoll_wait`'s), through the syscall table,
/// and says when it first sleeps with none once the test has marked the loop ``idle``: a loop
/// with no timer to run sleeps for ever, and wakes up zero times a second.
final class SleepRecorder: @unchecked Sendable {
    let timeouts = LockedValue<[Int64]>([])
    /// Set by the test once nothing should be waiting any more.
    let idle = LockedValue(false)
    let sleptForEver: XCTestExpectation
    /// The live calls, but for a recording `epoll_wait`.
    let calls: SystemCalls

    init(_ test: XCTestCase, description: String) {
        let sleptForEver = test.expectation(description: description)
        sleptForEver.assertForOverFulfill = false
        self.sleptForEver = sleptForEver
        let (timeouts, idle) = (timeouts, idle)
        var calls = SystemCalls.live
        calls.epollWait = { epfd, tokens, events, max, timeout in
            timeouts.update { $0.append(timeout) }
            if timeout < 0 && idle.get() { sleptForEver.fulfill() }
            return SystemCalls.live.epollWait(epfd, tokens, events, max, timeout)
        }
        self.calls = calls
    }
}

/// Counts of this process's resources, from /proc.
enum ProcessResources {
    /// How many descriptors this process has open, not counting Dispatch's own.
    ///
    /// libdispatch opens two kinds on its own schedule: once a second, while a root queue has
    /// work, its pool monitor opens `/proc/<tid>/stat` of each worker and closes it again; and
    /// its event loop creates a timerfd per clock the first time a timer of that clock is armed
    /// (its pool monitor arms one when the first worker starts), which can fall between two counts
    /// in a fresh process. The library opens neither kind, so both are left out, as ``threads()``
    /// leaves out Dispatch's workers.
    static func openDescriptors() -> Int {
        descriptorTargets().count
    }

    /// What each open descriptor refers to (`readlink` of `/proc/self/fd/N`), without Dispatch's
    /// monitor reads: print the difference of two of these when a count does not match.
    static func descriptorTargets() -> [Int32: String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        var targets: [Int32: String] = [:]
        for name in names {
            guard let fd = Int32(name) else { continue }
            // Gone already: the directory listing's own descriptor, or a brief one of Dispatch's.
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name)
            else { continue }
            if isDispatchMonitorRead(target) || target == "anon_inode:[timerfd]" { continue }
            targets[fd] = target
        }
        return targets
    }

    /// The descriptors opened and closed between two ``descriptorTargets()``, for a message.
    static func difference(from before: [Int32: String], to after: [Int32: String]) -> String {
        let opened = after.filter { before[$0.key] != $0.value }.sorted { $0.key < $1.key }
        let closed = before.filter { after[$0.key] != $0.value }.sorted { $0.key < $1.key }
        return
            "opened \(opened.map { "\($0.key) -> \($0.value)" }), closed \(closed.map { "\($0.key) -> \($0.value)" })"
    }

    private static func isDispatchMonitorRead(_ target: String) -> Bool {
        let parts = target.split(separator: "/")
        return parts.count == 3 && parts[0] == "proc" && parts[1].allSatisfy(\.isNumber) && parts[2] == "stat"
    }

    /// Threads of this process outside Dispatch's worker pool. The pool grows and shrinks on its
    /// own (work left by an earlier test can start a worker at any moment, more so on a loaded
    /// machine), so counting it would make these tests flaky without saying anything about the
    /// library. Its workers are named after their root queues ("com.apple.root.default-qos…",
    /// cut to the kernel's 15 bytes: "…qos.overcommit") or "…libdispatch…".
    static func threadNames() -> String {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.map { task in
            ((try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? "?").trimmingCharacters(
                in: .newlines)
                + "/"
                + ((try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8)) ?? "?").split(
                    separator: " "
                ).dropFirst(2).prefix(1).joined()
        }.joined(separator: ",")
    }

    static func threads() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            let name = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
            // A loop thread that has ended its loop is gone for pthread_join already; the kernel
            // lists it a moment longer.
            return !name.contains("qos") && !name.contains("dispatch")
                && name.trimmingCharacters(in: .newlines) != EventLoop.exitingThreadName
        }.count
    }

    /// Threads of this library: those the loops have started and that have not finished. (Their
    /// name is not enough: a Dispatch worker that a loop thread starts carries the loop's name
    /// until it sets its own.) A loop that was stopped has joined its threads, except one still in
    /// a callback, which is counted until it finishes.
    static func loopThreads() -> Int {
        LoopThreads.running.count
    }

    /// Descriptors that are inotify instances.
    /// Kernel watches of every process's inotify instances (those this user can read), which
    /// together count against `fs.inotify.max_user_watches`.
    static func inotifyWatchesOfEveryProcess() -> Int {
        let manager = FileManager.default
        var total = 0
        for process in (try? manager.contentsOfDirectory(atPath: "/proc")) ?? [] where Int(process) != nil {
            for fd in (try? manager.contentsOfDirectory(atPath: "/proc/\(process)/fd")) ?? [] {
                guard
                    (try? manager.destinationOfSymbolicLink(atPath: "/proc/\(process)/fd/\(fd)"))
                        == "anon_inode:inotify"
                else { continue }
                let info = (try? String(contentsOfFile: "/proc/\(process)/fdinfo/\(fd)", encoding: .utf8)) ?? ""
                total += info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
            }
        }
        return total
    }

    static func inotifyInstances() -> [Int32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap { name in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name),
                target == "anon_inode:inotify"
            else { return nil }
            return Int32(name)
        }
    }

    /// The inodes that inotify instances of this process watch, from their fdinfo.
    static func watchedInodes() -> [UInt64] {
        inotifyInstances().flatMap { fd in
            let info = (try? String(contentsOfFile: "/proc/self/fdinfo/\(fd)", encoding: .utf8)) ?? ""
            return info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.compactMap { line in
                line.split(separator: " ").first { $0.hasPrefix("ino:") }.flatMap { UInt64($0.dropFirst(4), radix: 16) }
            }
        }
    }

    /// The kernel watches of this process's inotify instances, as (descriptor, inode) pairs.
    static func watches() -> Set<[UInt64]> {
        Set(
            inotifyInstances().flatMap { fd in
                let info = (try? String(contentsOfFile: "/proc/self/fdinfo/\(fd)", encoding: .utf8)) ?? ""
                return info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.compactMap {
                    line -> [UInt64]? in
                    let fields = line.split(separator: " ")
                    guard
                        let wd = fields.first(where: { $0.hasPrefix("wd:") }).flatMap({
                            UInt64($0.dropFirst(3), radix: 16)
                        }),
                        let inode = fields.first(where: { $0.hasPrefix("ino:") }).flatMap({
                            UInt64($0.dropFirst(4), radix: 16)
                        })
                    else { return nil }
                    return [wd, inode]
                }
            })
    }

    /// Whether a kernel watch of this process is on the directory at `path`.
    static func isWatched(_ path: String) -> Bool {
        var status = stat()
        guard stat(path, &status) == 0 else { return false }
        return watchedInodes().contains(UInt64(status.st_ino))
    }

    /// Kernel watches of all inotify instances of this process, from their fdinfo.
    static func kernelWatches() -> Int {
        inotifyInstances().reduce(0) { total, fd in
            let info = (try? String(contentsOfFile: "/proc/self/fdinfo/\(fd)", encoding: .utf8)) ?? ""
            return total + info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
        }
    }
}

/// A fake `inotify_add_watch`/`inotify_rm_watch` pair: one descriptor per path, as the kernel
/// gives one per inode, recording every call.
final class FakeKernel: @unchecked Sendable {
    let calls = LockedValue<[String]>([])
    let descriptors = LockedValue<[String: Int32]>([:])

    var system: System {
        var table = SystemCalls.live
        table.inotifyAddWatch = { [self] _, path, mask in
            let name = String(cString: path)
            calls.update { $0.append("add \(name) \(String(mask, radix: 16))") }
            var wd: Int32 = 0
            descriptors.update { map in
                wd = map[name] ?? Int32(map.count + 1)
                map[name] = wd
            }
            return wd
        }
        table.inotifyRmWatch = { [self] _, wd in
            calls.update { $0.append("rm \(wd)") }
            descriptors.update { map in map = map.filter { $0.value != wd } }
            return 0
        }
        return System(table)
    }
}
