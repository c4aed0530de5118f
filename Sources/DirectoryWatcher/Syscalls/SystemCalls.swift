import CDirectoryWatcherShims
import Glibc

/// The raw system calls the library makes, as replaceable functions.
///
/// Each entry has the C signature and convention: it returns -1 and sets `errno` on failure.
/// ``SystemCalls/live`` calls the kernel; tests replace single entries to inject failures
/// (`ENOSPC`, `EMFILE`, `EINTR`, …) without root. Nothing else in the library calls these
/// functions directly: everything goes through ``System``.
///
/// Open to the test kit (`DirectoryWatcherTesting`) as its one way in: its simulated kernel is a
/// table of these, so that everything above the system calls is the library's own code.
@_spi(DirectoryWatcherTesting)
public struct SystemCalls: Sendable {
    public var inotifyInit1: @Sendable (_ flags: Int32) -> Int32
    public var inotifyAddWatch: @Sendable (_ fd: Int32, _ path: UnsafePointer<CChar>, _ mask: UInt32) -> Int32
    public var inotifyRmWatch: @Sendable (_ fd: Int32, _ wd: Int32) -> Int32
    public var epollCreate1: @Sendable (_ flags: Int32) -> Int32
    public var epollCtl: @Sendable (_ epfd: Int32, _ op: Int32, _ fd: Int32, _ events: UInt32, _ token: UInt64) -> Int32
    public var epollWait:
        @Sendable (
            _ epfd: Int32, _ tokens: UnsafeMutablePointer<UInt64>, _ events: UnsafeMutablePointer<UInt32>,
            _ max: Int32, _ timeoutNanoseconds: Int64
        ) -> Int32
    public var eventfd: @Sendable (_ initial: UInt32, _ flags: Int32) -> Int32
    public var memfdCreate: @Sendable (_ name: UnsafePointer<CChar>) -> Int32
    public var read: @Sendable (_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int
    public var write: @Sendable (_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int
    public var futimens: @Sendable (_ fd: Int32, _ times: UnsafePointer<timespec>) -> Int32
    public var close: @Sendable (_ fd: Int32) -> Int32
    public var getcwd: @Sendable (_ buffer: UnsafeMutablePointer<CChar>, _ size: Int) -> UnsafeMutablePointer<CChar>?
    /// Returns 0 or an error number, as pthread_create does (it does not set `errno`).
    public var pthreadCreate:
        @Sendable (
            _ thread: UnsafeMutablePointer<pthread_t>, _ argument: UnsafeMutableRawPointer,
            _ body: @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer?
        ) -> Int32
    public var readlink:
        @Sendable (_ path: UnsafePointer<CChar>, _ buffer: UnsafeMutablePointer<CChar>, _ size: Int) -> Int
    public var openDirectory: @Sendable (_ path: UnsafePointer<CChar>, _ noFollow: Bool) -> Int32
    /// `openat` of a directory; `options` are `CDW_OPEN_PATH_ONLY` and `CDW_OPEN_NO_FOLLOW`.
    public var openDirectoryAt: @Sendable (_ directory: Int32, _ path: UnsafePointer<CChar>, _ options: Int32) -> Int32
    public var openFile: @Sendable (_ path: UnsafePointer<CChar>) -> Int32
    public var getdents64: @Sendable (_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int
    public var entryStatus:
        @Sendable (
            _ directory: Int32, _ name: UnsafePointer<CChar>, _ status: UnsafeMutablePointer<cdw_entry_status>
        ) -> Int32
    /// statfs's `f_type` (the file system's magic number), or -1.
    public var fileSystemType: @Sendable (_ path: UnsafePointer<CChar>) -> Int64
    /// fanotify's calls (``System/fanotifyInit()``): a group that reports directories' handles.
    public var fanotifyInit: @Sendable () -> Int32
    public var fanotifyMarkFileSystem:
        @Sendable (_ fd: Int32, _ add: Bool, _ mask: UInt64, _ path: UnsafePointer<CChar>) -> Int32
    /// name_to_handle_at: `name` in `directory`, or (nil) `directory` itself.
    public var nameToHandle:
        @Sendable (
            _ directory: Int32, _ name: UnsafePointer<CChar>?, _ type: UnsafeMutablePointer<Int32>,
            _ bytes: UnsafeMutablePointer<UInt8>, _ length: UnsafeMutablePointer<UInt32>
        ) -> Int32
    public var openByHandle:
        @Sendable (_ mountFD: Int32, _ type: Int32, _ bytes: UnsafePointer<UInt8>, _ length: UInt32) -> Int32
    public var fileSystemID: @Sendable (_ fd: Int32, _ id: UnsafeMutablePointer<UInt8>) -> Int32
    /// `poll(2)` of one descriptor for `events`, returning at once: its `revents`, or -1.
    public var pollNow: @Sendable (_ fd: Int32, _ events: Int16) -> Int32

    /// The kernel's own calls.
    public static let live = SystemCalls(
        inotifyInit1: { Glibc.inotify_init1($0) },
        inotifyAddWatch: { Glibc.inotify_add_watch($0, $1, $2) },
        inotifyRmWatch: { Glibc.inotify_rm_watch($0, $1) },
        epollCreate1: { CDirectoryWatcherShims.epoll_create1($0) },
        epollCtl: { cdw_epoll_ctl($0, $1, $2, $3, $4) },
        epollWait: { cdw_epoll_wait($0, $1, $2, $3, $4) },
        eventfd: { CDirectoryWatcherShims.eventfd($0, $1) },
        memfdCreate: { cdw_memfd_create($0) },
        read: { cdw_read($0, $1, $2) },
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
