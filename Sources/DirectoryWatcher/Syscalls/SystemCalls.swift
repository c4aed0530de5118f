import CDirectoryWatcherShims
import Glibc

/// The raw system calls the library makes, as replaceable functions.
///
/// Each entry has the C signature and convention: it returns -1 and sets `errno` on failure.
/// ``SystemCalls/live`` calls the kernel; tests replace single entries to inject failures
/// (`ENOSPC`, `EMFILE`, `EINTR`, …) without root. Nothing else in the library calls these
/// functions directly: everything goes through ``System``.
struct SystemCalls: Sendable {
    var inotifyInit1: @Sendable (_ flags: Int32) -> Int32
    var inotifyAddWatch: @Sendable (_ fd: Int32, _ path: UnsafePointer<CChar>, _ mask: UInt32) -> Int32
    var inotifyRmWatch: @Sendable (_ fd: Int32, _ wd: Int32) -> Int32
    var epollCreate1: @Sendable (_ flags: Int32) -> Int32
    var epollCtl: @Sendable (_ epfd: Int32, _ op: Int32, _ fd: Int32, _ events: UInt32, _ token: UInt64) -> Int32
    var epollWait:
        @Sendable (
            _ epfd: Int32, _ tokens: UnsafeMutablePointer<UInt64>, _ events: UnsafeMutablePointer<UInt32>,
            _ max: Int32, _ timeoutNanoseconds: Int64
        ) -> Int32
    var eventfd: @Sendable (_ initial: UInt32, _ flags: Int32) -> Int32
    var memfdCreate: @Sendable (_ name: UnsafePointer<CChar>) -> Int32
    var read: @Sendable (_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int
    var write: @Sendable (_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int
    var futimens: @Sendable (_ fd: Int32, _ times: UnsafePointer<timespec>) -> Int32
    var close: @Sendable (_ fd: Int32) -> Int32
    var getcwd: @Sendable (_ buffer: UnsafeMutablePointer<CChar>, _ size: Int) -> UnsafeMutablePointer<CChar>?
    /// Returns 0 or an error number, as pthread_create does (it does not set `errno`).
    var pthreadCreate:
        @Sendable (
            _ thread: UnsafeMutablePointer<pthread_t>, _ argument: UnsafeMutableRawPointer,
            _ body: @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer?
        ) -> Int32
    var readlink: @Sendable (_ path: UnsafePointer<CChar>, _ buffer: UnsafeMutablePointer<CChar>, _ size: Int) -> Int
    var openDirectory: @Sendable (_ path: UnsafePointer<CChar>, _ noFollow: Bool) -> Int32
    /// `openat` of a directory; `options` are `CDW_OPEN_PATH_ONLY` and `CDW_OPEN_NO_FOLLOW`.
    var openDirectoryAt: @Sendable (_ directory: Int32, _ path: UnsafePointer<CChar>, _ options: Int32) -> Int32
    var openFile: @Sendable (_ path: UnsafePointer<CChar>) -> Int32
    var getdents64: @Sendable (_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int
    var entryStatus:
        @Sendable (
            _ directory: Int32, _ name: UnsafePointer<CChar>, _ status: UnsafeMutablePointer<cdw_entry_status>
        ) -> Int32
    /// statfs's `f_type` (the file system's magic number), or -1.
    var fileSystemType: @Sendable (_ path: UnsafePointer<CChar>) -> Int64
    /// fanotify's calls (``System/fanotifyInit()``): a group that reports directories' handles.
    var fanotifyInit: @Sendable () -> Int32
    var fanotifyMarkFileSystem:
        @Sendable (_ fd: Int32, _ add: Bool, _ mask: UInt64, _ path: UnsafePointer<CChar>) -> Int32
    /// name_to_handle_at: `name` in `directory`, or (nil) `directory` itself.
    var nameToHandle:
        @Sendable (
            _ directory: Int32, _ name: UnsafePointer<CChar>?, _ type: UnsafeMutablePointer<Int32>,
            _ bytes: UnsafeMutablePointer<UInt8>, _ length: UnsafeMutablePointer<UInt32>
        ) -> Int32
    var openByHandle:
        @Sendable (_ mountFD: Int32, _ type: Int32, _ bytes: UnsafePointer<UInt8>, _ length: UInt32) -> Int32
    var fileSystemID: @Sendable (_ fd: Int32, _ id: UnsafeMutablePointer<UInt8>) -> Int32
    /// `poll(2)` of one descriptor for `events`, returning at once: its `revents`, or -1.
    var pollNow: @Sendable (_ fd: Int32, _ events: Int16) -> Int32

    /// The kernel's own calls.
    static let live = SystemCalls(
        inotifyInit1: { Glibc.inotify_init1($0) },
        inotifyAddWatch: { Glibc.inotify_add_watch($0, $1, $2) },
        inotifyRmWatch: { Glibc.inotify_rm_watch($0, $1) },
        epollCreate1: { CDirectoryWatcherShims.epoll_create1($0) },
        epollCtl: { cdw_epoll_ctl($0, $1, $2, $3, $4) },
        epollWait: { cdw_epoll_wait($0, $1, $2, $3, $4) },
        eventfd: { CDirectoryWatcherShims.eventfd($0, $1) },
        memfdCreate: { cdw_memfd_create($0) },
        read: { Glibc.read($0, $1, $2) },
        write: { Glibc.write($0, $1, $2) },
        futimens: { Glibc.futimens($0, $1) },
        close: { Glibc.close($0) },
        getcwd: { Glibc.getcwd($0, $1) },
        pthreadCreate: { cdw_thread_create($0, $2, $1) },
        readlink: { Glibc.readlink($0, $1, $2) },
        openDirectory: { cdw_open_directory($0, $1 ? 1 : 0) },
        openDirectoryAt: { cdw_open_directory_at($0, $1, $2) },
        openFile: { Glibc.open($0, O_RDONLY | O_CLOEXEC) },
        getdents64: { cdw_getdents64($0, $1, UInt($2)) },
        entryStatus: { cdw_entry_status_at($0, $1, $2) },
        fileSystemType: { cdw_file_system_type($0) },
        fanotifyInit: { cdw_fanotify_init() },
        fanotifyMarkFileSystem: { cdw_fanotify_mark_filesystem($0, $1 ? 1 : 0, $2, $3) },
        nameToHandle: { directory, name, type, bytes, length in
            cdw_name_to_handle(directory, name, type, bytes, length)
        },
        openByHandle: { cdw_open_by_handle($0, $1, $2, $3) },
        fileSystemID: { cdw_file_system_id($0, $1) },
        pollNow: { fd, events in
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let count = Glibc.poll(&entry, 1, 0)
            return count < 0 ? -1 : Int32(entry.revents)
        }
    )
}

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

    /// Runs `body` until it does not fail with `EINTR`; -1 becomes a ``SyscallError``.
    @inline(__always)
    private func retrying<Result: FixedWidthInteger>(
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

    /// The corresponding C function is `inotify_init1`. Its `EMFILE` says which limit it hit
    /// (``SyscallError/processOutOfDescriptors``).
    func inotifyInit() throws(SyscallError) -> Int32 {
        do {
            return try retrying("inotify_init1") { calls.inotifyInit1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }
        } catch  where error.errno == EMFILE {
            // EMFILE is either limit: this user's inotify instances, or this process's
            // descriptors. Another kind of descriptor tells them apart.
            var failure = error
            failure.processOutOfDescriptors = !canOpenAnotherDescriptor()
            throw failure
        }
    }

    /// Whether the process can open one more descriptor: an eventfd, the cheapest kind, opened and
    /// closed at once. (Racy, as any such check is; it only chooses what an error message says.)
    private func canOpenAnotherDescriptor() -> Bool {
        let fd = calls.eventfd(0, Int32(EFD_CLOEXEC))
        if fd >= 0 {
            close(fd)
            return true
        }
        return Glibc.errno != EMFILE
    }

    /// The corresponding C function is `inotify_add_watch`.
    func inotifyAddWatch(_ fd: Int32, path: FileSystemPath, mask: UInt32) throws(SyscallError) -> Int32 {
        try path.withCString { pointer throws(SyscallError) in
            try retrying("inotify_add_watch") { calls.inotifyAddWatch(fd, pointer, mask) }
        }
    }

    /// The corresponding C function is `inotify_rm_watch`.
    func inotifyRemoveWatch(_ fd: Int32, _ wd: Int32) throws(SyscallError) {
        _ = try retrying("inotify_rm_watch") { calls.inotifyRmWatch(fd, wd) }
    }

    func epollCreate() throws(SyscallError) -> Int32 {
        try retrying("epoll_create1") { calls.epollCreate1(Int32(EPOLL_CLOEXEC)) }
    }

    /// Registers `fd` for readability, level-triggered, tagged with `token`.
    func epollAdd(_ epfd: Int32, fd: Int32, token: UInt64) throws(SyscallError) {
        _ = try retrying("epoll_ctl") { calls.epollCtl(epfd, EPOLL_CTL_ADD, fd, EPOLLIN.rawValue, token) }
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

    /// The process's current directory. The corresponding C function is `getcwd`.
    func currentDirectory() throws(SyscallError) -> FileSystemPath {
        var size = 4096
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            let result = buffer.withUnsafeMutableBufferPointer { calls.getcwd($0.baseAddress!, size) }
            if result != nil {
                return FileSystemPath(bytes: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) })
            }
            let code = Glibc.errno
            if code == ERANGE && size < 1 << 20 {
                size *= 4
                continue
            }
            if code == EINTR { continue }
            // Past PATH_MAX the getcwd system call gives up (glibc then walks up itself, other C
            // libraries do not).
            if code == ENAMETOOLONG { return try currentDirectoryWalkingUp() }
            throw SyscallError(function: "getcwd", errno: code)
        }
    }

    /// The current directory's path found as getcwd(3) finds it without the kernel's help: from
    /// the directory up through `..` to `/`, each directory's name read from its parent's listing
    /// (the entry with its device and inode). Each directory on the way must be readable.
    private func currentDirectoryWalkingUp() throws(SyscallError) -> FileSystemPath {
        let dot = Array(".".utf8)
        var directory = try openDirectory(at: AT_FDCWD, dot[...], options: CDW_OPEN_PATH_ONLY)
        defer { close(directory) }
        guard let root = try entryStatus(in: AT_FDCWD, name: Array("/".utf8)),
            var here = try entryStatus(in: directory, name: dot)
        else { throw SyscallError(function: "getcwd", errno: ENOENT) }
        var names: [[UInt8]] = []
        while here.device != root.device || here.inode != root.inode {
            let parent = try openDirectory(at: directory, Array("..".utf8)[...], options: 0)
            close(directory)
            directory = parent
            guard let above = try entryStatus(in: parent, name: dot) else {
                throw SyscallError(function: "getcwd", errno: ENOENT)
            }
            // Its own parent: the root of a chroot or of a mount namespace, where `/` leads.
            if above.device == here.device && above.inode == here.inode { break }
            // No entry of the parent is this directory: it was removed, as getcwd then says.
            guard let name = try entryName(of: here, in: parent) else {
                throw SyscallError(function: "getcwd", errno: ENOENT)
            }
            names.append(name)
            here = above
        }
        var path: [UInt8] = []
        for name in names.reversed() {
            path.append(UInt8(ascii: "/"))
            path += name
        }
        return FileSystemPath(bytes: path.isEmpty ? Array("/".utf8) : path)
    }

    /// The name under which the directory `directory` (open for reading) holds the directory
    /// `target`. The listing's inode is tried first; every subdirectory after, since a mount
    /// point's entry (and an overlay's) lists another inode than the directory it leads to.
    private func entryName(of target: EntryStatus, in directory: Int32) throws(SyscallError) -> [UInt8]? {
        var likely: [[UInt8]] = []
        var others: [[UInt8]] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let count = try readDirectory(directory, into: buffer)
            if count == 0 { break }
            DirectoryEntryParser.forEach(UnsafeRawBufferPointer(rebasing: buffer[..<count])) { name, inode, type in
                if inode == target.inode {
                    likely.append(Array(name))
                } else if DirectoryEntryParser.kind(type) ?? .directory == .directory {
                    others.append(Array(name))
                }
            }
        }
        for name in likely + others {
            if let status = try entryStatus(in: directory, name: name), status.device == target.device,
                status.inode == target.inode
            {
                return name
            }
        }
        return nil
    }

    /// The target of the symbolic link at `path`; nil when `path` is not a symbolic link
    /// (`EINVAL`) or names nothing (`ENOENT`). The corresponding C function is `readlink`.
    func symbolicLinkTarget(_ path: FileSystemPath) throws(SyscallError) -> FileSystemPath? {
        if Self.isTooLong(path) {
            // Through its directory, opened in steps: `/proc/self/fd/N/name` is short, and the
            // kernel reads the link named by its last component without following it.
            let parent: Int32
            do {
                parent = try openDirectoryReference(path.parent, followingLinks: true)
            } catch  where error.errno == ENOENT {
                return nil
            }
            defer { close(parent) }
            return try symbolicLinkTarget(FileSystemPath("/proc/self/fd/\(parent)").appending(path.lastComponent))
        }
        var size = 256
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            let count = path.withCString { pointer in
                buffer.withUnsafeMutableBufferPointer { calls.readlink(pointer, $0.baseAddress!, size) }
            }
            if count >= 0 && count < size {
                return FileSystemPath(bytes: buffer[..<count].map { UInt8(bitPattern: $0) })
            }
            if count >= 0 && size < 1 << 16 {
                size *= 4  // possibly truncated: try a larger buffer
                continue
            }
            let code = count >= 0 ? ENAMETOOLONG : Glibc.errno
            if code == EINTR { continue }
            if code == EINVAL || code == ENOENT { return nil }
            throw SyscallError(function: "readlink", errno: code)
        }
    }

    /// Opens the directory at `path` for listing. The corresponding C function is `open`, with
    /// `O_DIRECTORY`.
    /// Opens a directory to list it (and, for a tree, to watch exactly the directory listed).
    /// Not following links, a symbolic link at `path` is refused with `ELOOP`. A path too long
    /// for one system call (``isTooLong(_:)``) is opened in steps.
    func openDirectory(_ path: FileSystemPath, followingLinks: Bool = true) throws(SyscallError) -> Int32 {
        if Self.isTooLong(path) {
            return try openInSteps(path, options: followingLinks ? 0 : CDW_OPEN_NO_FOLLOW)
        }
        return try path.withCString { pointer throws(SyscallError) in
            try retrying("open") { calls.openDirectory(pointer, !followingLinks) }
        }
    }

    /// Whether `path` is too long for a system call: PATH_MAX bytes with its NUL, though the
    /// directory it names may be as deep as any.
    static func isTooLong(_ path: FileSystemPath) -> Bool {
        path.bytes.count >= Int(PATH_MAX)
    }

    /// Opens the directory at `path` with `O_PATH`, in steps: a descriptor that names the
    /// directory without reading it, to watch it through `/proc/self/fd` when its path is too long
    /// for `inotify_add_watch`. Unlike an open for reading, it raises no event on the directory,
    /// and needs search permission only.
    func openDirectoryReference(_ path: FileSystemPath, followingLinks: Bool) throws(SyscallError) -> Int32 {
        try openInSteps(path, options: CDW_OPEN_PATH_ONLY | (followingLinks ? 0 : CDW_OPEN_NO_FOLLOW))
    }

    /// Opens the directory at `path`, of any length, with `options` (``SystemCalls/openDirectoryAt``):
    /// each step opens with `O_PATH` as many whole components as fit in a system call, relative to
    /// the directory the step before reached; the last opens the directory itself. The kernel
    /// resolves links and `..` within each step, and so along the path, as in one lookup.
    private func openInSteps(_ path: FileSystemPath, options: Int32) throws(SyscallError) -> Int32 {
        let bytes = path.bytes
        let slash = UInt8(ascii: "/")
        let longest = Int(PATH_MAX) - 1
        var directory = AT_FDCWD
        defer { if directory != AT_FDCWD { close(directory) } }
        var start = 0
        while bytes.count - start > longest {
            // Up to the last slash that fits; none past the start: one name longer than a path.
            guard let cut = bytes[start..<(start + longest)].lastIndex(of: slash), cut > start else {
                throw SyscallError(function: "open", errno: ENAMETOOLONG)
            }
            let reached = try openDirectory(at: directory, bytes[start..<cut], options: CDW_OPEN_PATH_ONLY)
            if directory != AT_FDCWD { close(directory) }
            directory = reached
            // The rest is relative to `reached`: a slash left at its start would make it absolute.
            start = cut + 1
            while start < bytes.count && bytes[start] == slash { start += 1 }
        }
        return try openDirectory(
            at: directory, start < bytes.count ? bytes[start...] : [UInt8(ascii: ".")][...], options: options)
    }

    /// `openat` of the directory `path` relative to `directory` (`AT_FDCWD`: the current one).
    private func openDirectory(at directory: Int32, _ path: ArraySlice<UInt8>, options: Int32) throws(SyscallError)
        -> Int32
    {
        try FileSystemPath(bytes: path).withCString { pointer throws(SyscallError) in
            try retrying("open") { calls.openDirectoryAt(directory, pointer, options) }
        }
    }

    /// The per-user limit on inotify watches, read from `/proc`; nil when it cannot be read. For
    /// messages: a tree that reaches it says how far it got. The lower of the machine's
    /// (`fs.inotify.max_user_watches`) and the user namespace's (`user.max_inotify_watches`,
    /// which a container or `unshare --user` may lower, and which the kernel checks too); in the
    /// first namespace the two are one setting.
    func watchLimit() -> Int? {
        let limits = ["/proc/sys/fs/inotify/max_user_watches", "/proc/sys/user/max_inotify_watches"].compactMap {
            readNumber(FileSystemPath($0))
        }
        return limits.min()
    }

    /// The decimal number a `/proc` file starts with; nil when it cannot be read.
    private func readNumber(_ file: FileSystemPath) -> Int? {
        guard
            let fd = try? file.withCString({ pointer throws(SyscallError) in
                try retrying("open") { calls.openFile(pointer) }
            })
        else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { calls.read(fd, $0.baseAddress!, $0.count) }
        guard count > 0 else { return nil }
        return Int(String(decoding: bytes[..<count].prefix { $0 >= 0x30 && $0 <= 0x39 }, as: UTF8.self))
    }

    /// The magic number of the file system that holds `path` (`statfs`'s `f_type`).
    func fileSystemType(_ path: FileSystemPath) throws(SyscallError) -> UInt64 {
        let type = try path.withCString { pointer throws(SyscallError) in
            try retrying("statfs") { calls.fileSystemType(pointer) }
        }
        return UInt64(type)
    }

    /// A small file of `/proc` read whole (`mountinfo`), as text; nil when it cannot be read.
    func readProcFile(_ path: String) -> String? {
        guard
            let fd = try? FileSystemPath(path).withCString({ pointer throws(SyscallError) in
                try retrying("open") { calls.openFile(pointer) }
            })
        else { return nil }
        defer { close(fd) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { calls.read(fd, $0.baseAddress!, $0.count) }
            if count == -1 && Glibc.errno == EINTR { continue }
            guard count > 0 else { break }
            contents += chunk[..<count]
        }
        return String(decoding: contents, as: UTF8.self)
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

    // MARK: - fanotify

    /// A fanotify group that reports each event with its directory's handle and the entry's
    /// name. `EPERM` without `CAP_SYS_ADMIN`; `EINVAL` on kernels before 5.9.
    func fanotifyInit() throws(SyscallError) -> Int32 {
        try retrying("fanotify_init") { calls.fanotifyInit() }
    }

    /// Adds (or removes) the mark of the whole file system that holds `path`.
    func fanotifyMark(_ fd: Int32, fileSystemOf path: FileSystemPath, mask: UInt64, add: Bool) throws(SyscallError) {
        _ = try path.withCString { pointer throws(SyscallError) in
            try retrying("fanotify_mark") { calls.fanotifyMarkFileSystem(fd, add, mask, pointer) }
        }
    }

    /// The id fanotify's records give the file system of the open `fd` (`fstatfs`'s `f_fsid`).
    func fileSystemID(_ fd: Int32) throws(SyscallError) -> [UInt8] {
        var id = [UInt8](repeating: 0, count: 8)
        _ = try id.withUnsafeMutableBufferPointer { buffer throws(SyscallError) in
            try retrying("fstatfs") { calls.fileSystemID(fd, buffer.baseAddress!) }
        }
        return id
    }

    /// The handle of `name` in the open directory `directory`, or of `directory` itself (nil),
    /// keyed with its file system's id. `EOPNOTSUPP`: the file system gives no handles.
    func fileHandle(in directory: Int32, name: [UInt8]?, fileSystemID: [UInt8]) throws(SyscallError) -> KernelHandle {
        var type: Int32 = 0
        var length: UInt32 = 128
        var bytes = [UInt8](repeating: 0, count: 128)
        _ = try bytes.withUnsafeMutableBufferPointer { buffer throws(SyscallError) in
            try retrying("name_to_handle_at") {
                if let name {
                    return (name + [0]).withUnsafeBufferPointer { terminated in
                        terminated.withMemoryRebound(to: CChar.self) {
                            calls.nameToHandle(directory, $0.baseAddress!, &type, buffer.baseAddress!, &length)
                        }
                    }
                }
                return calls.nameToHandle(directory, nil, &type, buffer.baseAddress!, &length)
            }
        }
        return KernelHandle(fileSystemID: fileSystemID, type: type, bytes: bytes[..<Int(length)])
    }

    /// A descriptor (`O_PATH`) of the object `handle` names, on the file system `mountFD` is
    /// open on. `ESTALE`: the object is gone.
    func open(_ handle: KernelHandle, mountFD: Int32) throws(SyscallError) -> Int32 {
        let bytes = Array(handle.bytes)
        return try bytes.withUnsafeBufferPointer { buffer throws(SyscallError) in
            try retrying("open_by_handle_at") {
                calls.openByHandle(mountFD, handle.type, buffer.baseAddress!, UInt32(buffer.count))
            }
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
