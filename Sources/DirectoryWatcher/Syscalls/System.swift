import CDirectoryWatcherShims
import Glibc

/// The one thin layer over ``SystemCalls``: retries on `EINTR`, keeps `errno` in a typed error.
///
/// `EBADF` and `EFAULT` mean the library passed a closed descriptor or a bad pointer: those are
/// programming errors and trap instead of being thrown.
struct System: Sendable {
    var calls: SystemCalls

    init(_ calls: SystemCalls = .live) { self.calls = calls }

    /// CLOCK_REALTIME, the clock file times are kept in.
    static func wallClockNow() -> EntryStatus.Time {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return EntryStatus.Time(seconds: Int64(now.tv_sec), nanoseconds: UInt32(now.tv_nsec))
    }

    /// CLOCK_REALTIME_COARSE: the wall clock as of the last tick, which is never later than the
    /// time the file system stamps on a file created from now on (its coarse stamps read this
    /// clock; fine-grained stamps are later still).
    static func coarseWallClockNow() -> EntryStatus.Time {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &now)
        return EntryStatus.Time(seconds: Int64(now.tv_sec), nanoseconds: UInt32(now.tv_nsec))
    }

    /// Nanoseconds of CLOCK_MONOTONIC (through the vDSO: no system call, nothing to fake).
    static func monotonicNow() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// Sleeps `nanoseconds` (the event loop's pause under a stream of events,
    /// ``BurstPacing``). Time, not the kernel's state: nothing to fake, and a simulated kernel's
    /// loop pauses for real, briefly.
    static func sleep(nanoseconds: UInt64) {
        var request = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var remaining = timespec()
        // A signal cuts it short: the rest is slept.
        while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
    }

    /// Runs `body` until it does not fail with `EINTR`; -1 becomes a ``SyscallError``.
    @inline(__always)
    func retrying<Result: FixedWidthInteger>(
        _ function: String, _ body: () -> Result
    ) throws(SyscallError) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            precondition(code != EBADF && code != EFAULT, "\(function) failed with \(SyscallError.describe(code))")
            throw SyscallError(function: function, errno: code)
        }
    }

    /// Whether the process can open one more descriptor: an eventfd, the cheapest kind, opened and
    /// closed at once. (Racy, as any such check is; it only chooses what an error message says.)
    func canOpenAnotherDescriptor() -> Bool {
        let fd = calls.eventfd(0, Int32(EFD_CLOEXEC))
        if fd >= 0 {
            close(fd)
            return true
        }
        return Glibc.errno != EMFILE
    }

    func epollCreate() throws(SyscallError) -> Int32 {
        try retrying("epoll_create1") { calls.epollCreate1(Int32(EPOLL_CLOEXEC)) }
    }

    /// Registers `fd` for readability, level-triggered, tagged with `token`.
    func epollAdd(_ epfd: Int32, fd: Int32, token: UInt64) throws(SyscallError) {
        _ = try retrying("epoll_ctl") { calls.epollCtl(epfd, EPOLL_CTL_ADD, fd, EPOLLIN.rawValue, token) }
    }

    /// Takes `fd` out of the epoll set.
    func epollRemove(_ epfd: Int32, fd: Int32) throws(SyscallError) {
        _ = try retrying("epoll_ctl") { calls.epollCtl(epfd, EPOLL_CTL_DEL, fd, 0, 0) }
    }

    /// Registers `fd` for its priority event (`EPOLLPRI`, and `EPOLLERR`, which epoll always
    /// reports), level-triggered, tagged with `token`: the mount table's change (proc(5),
    /// `/proc/self/mountinfo`), whose descriptor is always readable.
    func epollAddForPriority(_ epfd: Int32, fd: Int32, token: UInt64) throws(SyscallError) {
        _ = try retrying("epoll_ctl") { calls.epollCtl(epfd, EPOLL_CTL_ADD, fd, EPOLLPRI.rawValue, token) }
    }

    /// Whether the mount table changed since its descriptor (``openMountTable()``) was last
    /// polled, asked now; asking takes the change, as epoll's own poll would.
    func mountTableChanged(_ fd: Int32) -> Bool {
        let events = calls.pollNow(fd, Int16(POLLPRI))
        return events > 0 && events & Int32(POLLPRI) != 0
    }

    /// Opens `/proc/self/mountinfo` to be polled: each change of this process's mount table (a
    /// mount made, taken away or moved) makes its descriptor report `EPOLLPRI | EPOLLERR` once
    /// (the poll itself rearms it). What the table holds is read with ``readProcFile(_:)``.
    func openMountTable() throws(SyscallError) -> Int32 {
        try FileSystemPath("/proc/self/mountinfo").withCString { pointer throws(SyscallError) in
            try retrying("open") { calls.openFile(pointer) }
        }
    }

    /// Waits for readiness, at most `timeoutNanoseconds` (negative: for ever; to the nanosecond
    /// where the kernel has epoll_pwait2, else rounded up to a millisecond). `EINTR` returns 0 ready events rather than retrying, so the caller
    /// recomputes its timeout from the clock.
    func epollWait(
        _ epfd: Int32, tokens: UnsafeMutablePointer<UInt64>, events: UnsafeMutablePointer<UInt32>, max: Int32,
        timeoutNanoseconds: Int64
    ) throws(SyscallError) -> Int {
        let count = calls.epollWait(epfd, tokens, events, max, timeoutNanoseconds)
        if count >= 0 { return Int(count) }
        let code = Glibc.errno
        if code == EINTR { return 0 }
        precondition(code != EBADF && code != EFAULT, "epoll_wait failed with \(SyscallError.describe(code))")
        throw SyscallError(function: "epoll_wait", errno: code)
    }

    func eventFD() throws(SyscallError) -> Int32 {
        try retrying("eventfd") { calls.eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
    }

    func memfdCreate(_ name: String) throws(SyscallError) -> Int32 {
        try FileSystemPath(name).withCString { pointer throws(SyscallError) in
            try retrying("memfd_create") { calls.memfdCreate(pointer) }
        }
    }

    /// Reads into `buffer`; returns nil when the descriptor would block (`EAGAIN`).
    func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SyscallError) -> Int? {
        do {
            return try retrying("read") { calls.read(fd, buffer.baseAddress!, buffer.count) }
        } catch  where error.errno == EAGAIN {
            return nil
        }
    }

    /// Adds one to an eventfd counter; a full counter (`EAGAIN`) already means "wake up".
    func signal(eventFD fd: Int32) throws(SyscallError) {
        var one: UInt64 = 1
        do {
            _ = try withUnsafeBytes(of: &one) { bytes throws(SyscallError) in
                try retrying("write") { calls.write(fd, bytes.baseAddress!, bytes.count) }
            }
        } catch  where error.errno == EAGAIN {}
    }

    /// Resets an eventfd counter so level-triggered epoll stops reporting it.
    func drain(eventFD fd: Int32) throws(SyscallError) {
        var value: UInt64 = 0
        _ = try withUnsafeMutableBytes(of: &value) { bytes throws(SyscallError) in
            try read(fd, into: bytes)
        }
    }

    /// Sets the file's timestamps to now, which raises `IN_ATTRIB` on it.
    ///
    /// An attribute change is reported from the inode, whatever the descriptor: writes through a
    /// memfd's own descriptor raise no `IN_MODIFY` on recent kernels (pseudo files are opened
    /// without notifications), but its timestamps still do.
    func touch(_ fd: Int32) throws(SyscallError) {
        let now = timespec(tv_sec: 0, tv_nsec: (1 << 30) - 1)  // UTIME_NOW, a macro Swift cannot import
        var times = (now, now)
        _ = try withUnsafePointer(to: &times) { pair throws(SyscallError) in
            try pair.withMemoryRebound(to: timespec.self, capacity: 2) { first throws(SyscallError) in
                try retrying("futimens") { calls.futimens(fd, first) }
            }
        }
    }

    /// Reads the next records of the directory `fd` into `buffer`; 0 at the end. The
    /// corresponding system call is `getdents64`.
    func readDirectory(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SyscallError) -> Int {
        try retrying("getdents64") { calls.getdents64(fd, buffer.baseAddress!, buffer.count) }
    }

    /// The status of the entry `name` of the directory `fd`, not following a symbolic link; nil
    /// when the entry is gone (`ENOENT`: removed since it was listed). The corresponding C
    /// function is `statx`.
    func entryStatus(in fd: Int32, name: [UInt8]) throws(SyscallError) -> EntryStatus? {
        var status = cdw_entry_status()
        var terminated = name
        terminated.append(0)
        let result = terminated.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { calls.entryStatus(fd, $0.baseAddress!, &status) }
        }
        guard result == -1 else { return EntryStatus(status) }
        let code = Glibc.errno
        if code == ENOENT { return nil }
        if code == EINTR { return try entryStatus(in: fd, name: name) }
        throw SyscallError(function: "statx", errno: code)
    }

    /// ``entryStatus(in:name:)`` for a name that already ends with its NUL (a polled listing
    /// reuses one buffer for every name, so no array is made per entry).
    func entryStatus(in fd: Int32, terminatedName name: [UInt8]) throws(SyscallError) -> EntryStatus? {
        var status = cdw_entry_status()
        while true {
            let result = name.withUnsafeBufferPointer { bytes in
                bytes.withMemoryRebound(to: CChar.self) { calls.entryStatus(fd, $0.baseAddress!, &status) }
            }
            if result != -1 { return EntryStatus(status) }
            let code = Glibc.errno
            if code == ENOENT { return nil }
            if code != EINTR { throw SyscallError(function: "statx", errno: code) }
        }
    }

    /// ``entryStatus(in:name:)`` for a NUL-terminated name in memory the caller holds (a
    /// listing's names, read first and then given their statuses on several threads).
    func entryStatus(in fd: Int32, terminated name: UnsafePointer<CChar>) throws(SyscallError) -> EntryStatus? {
        var status = cdw_entry_status()
        while true {
            if calls.entryStatus(fd, name, &status) != -1 { return EntryStatus(status) }
            let code = Glibc.errno
            if code == ENOENT { return nil }
            if code != EINTR { throw SyscallError(function: "statx", errno: code) }
        }
    }

    /// Closes `fd`. `EINTR` counts as closed: Linux always releases the descriptor, and a retry
    /// could close a descriptor another thread has just been given.
    func close(_ fd: Int32) {
        let result = calls.close(fd)
        if result == -1 {
            let code = Glibc.errno
            precondition(code != EBADF, "close(\(fd)) failed with EBADF: descriptor closed twice")
        }
    }
}
