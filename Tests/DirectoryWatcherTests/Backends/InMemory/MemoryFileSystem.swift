import Glibc

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher
@testable import DirectoryWatcherTesting

/// The in-memory backend: the test kit's simulated kernel (``SimulatedKernel``, a file system in
/// memory with inotify's semantics), watched through ``DirectoryWatchBackend`` rather than
/// through its system calls, so that a router runs over it with no loop and no thread
/// (``InMemoryLoop``). Its listings go through the library's system-call table (`open`,
/// `getdents64`, `statx`, `close`); every other call fails with `ENOSYS`: a test that reaches the
/// kernel is a test that does not run in memory.
typealias MemoryFileSystem = SimulatedKernel

extension SimulatedKernel: DirectoryWatchBackend {
    public func watch(_ path: FileSystemPath, events: UInt32, followingLinks: Bool) throws(SyscallError) -> Int32 {
        try watchResult(addWatch(path.description, mask: events))
    }

    public func watch(openDirectory directory: Int32, events: UInt32) throws(SyscallError) -> Int32 {
        try watchResult(addWatch("/proc/self/fd/\(directory)", mask: events))
    }

    public func unwatch(_ descriptor: Int32) {
        removeWatch(descriptor)
    }

    private func watchResult(_ result: Result<Int32, Errno>) throws(SyscallError) -> Int32 {
        switch result {
        case .success(let wd): return wd
        case .failure(let error): throw SyscallError(function: "watch", errno: error.code)
        }
    }

    /// Takes up to `limit` queued events, as a read does, as the router receives them.
    func read(upTo limit: Int = .max) -> [BackendEvent] {
        take(upTo: limit).map { BackendEvent(wd: $0.wd, mask: $0.mask, cookie: $0.cookie, name: $0.name) }
    }

    /// The listing's system calls over this file system; the rest fail with `ENOSYS`.
    var system: System {
        var calls = SystemCalls.unavailable
        let simulated = self.calls(over: .unavailable)
        calls.openDirectory = simulated.openDirectory
        calls.openDirectoryAt = simulated.openDirectoryAt
        calls.getdents64 = simulated.getdents64
        calls.entryStatus = simulated.entryStatus
        calls.close = simulated.close
        return System(calls)
    }

    /// The wall clock of the file system's times, for the router's clocks (``clockReading()``).
    func readClock() -> EntryStatus.Time {
        EntryStatus.Time(seconds: clockReading(), nanoseconds: 0)
    }
}

extension SystemCalls {
    /// A table whose every call fails with `ENOSYS`, for fakes to fill in what they serve.
    static let unavailable: SystemCalls = {
        @Sendable func none() -> Int32 {
            errno = ENOSYS
            return -1
        }
        @Sendable func noBytes() -> Int {
            errno = ENOSYS
            return -1
        }
        return SystemCalls(
            inotifyInit1: { _ in none() }, inotifyAddWatch: { _, _, _ in none() }, inotifyRmWatch: { _, _ in none() },
            epollCreate1: { _ in none() }, epollCtl: { _, _, _, _, _ in none() },
            epollWait: { _, _, _, _, _ in none() }, eventfd: { _, _ in none() }, memfdCreate: { _ in none() },
            read: { _, _, _ in noBytes() }, write: { _, _, _ in noBytes() }, futimens: { _, _ in none() },
            close: { _ in none() },
            getcwd: { _, _ in
                errno = ENOSYS
                return nil
            },
            pthreadCreate: { _, _, _ in ENOSYS }, readlink: { _, _, _ in noBytes() }, openDirectory: { _, _ in none() },
            openDirectoryAt: { _, _, _ in none() }, openFile: { _ in none() }, getdents64: { _, _, _ in noBytes() },
            entryStatus: { _, _, _ in none() }, fileSystemType: { _ in Int64(none()) }, fanotifyInit: { none() },
            fanotifyMarkFileSystem: { _, _, _, _ in none() }, nameToHandle: { _, _, _, _, _ in none() },
            openByHandle: { _, _, _, _ in none() }, fileSystemID: { _, _ in none() }, pollNow: { _, _ in none() })
    }()
}
