import Glibc

/// What the router asks of a backend that watches a whole file system at once, with one mark,
/// and names its directories by file handle (fanotify's `FAN_MARK_FILESYSTEM`). The router keeps
/// the trees; the backend keeps its marks and its table from a directory's handle to the
/// descriptor the router's watch table knows it by (``MarkedDescriptors``). Its records are
/// ``MarkEvent``s, whose bits are ``EventMask``'s and ``MarkBits``'; the event loop reads them and
/// hands them to the router. Loop thread only.
protocol FileSystemMarkBackend: AnyObject {
    /// Why marking was refused for want of privilege: later trees are refused at once.
    var refusal: SyscallError? { get set }
    /// Opens what the marks are made with, if it is not open yet.
    func openGroup() throws(SyscallError)
    /// Marks the file system of `path` (whose id is `id`) for what a watcher selecting `mask`
    /// (``EventMask`` bits) needs, or adds to its mark. The mark takes `directory` (its mount
    /// point, open) as the descriptor handles are opened against when it is new; otherwise the
    /// caller keeps it. Returns whether the mark took it.
    func mark(_ path: FileSystemPath, directory: Int32, id: [UInt8], selecting mask: UInt32) throws(SyscallError)
        -> Bool
    /// A watcher of the file system `id` leaves: the last one removes the mark.
    func unmark(_ id: [UInt8])
    /// Closes what the marks are made with once no mark is left.
    func closeGroupIfUnused()
    /// The descriptor handles of that file system are opened against.
    func mountFD(for handle: KernelHandle) -> Int32?
    /// The descriptor of a directory's handle, if it has one.
    func descriptor(_ handle: KernelHandle) -> Int32?
    /// The descriptor of `handle`, given now if it has none.
    func descriptor(for handle: KernelHandle) -> Int32
    /// The handle a descriptor stands for.
    func handle(_ wd: Int32) -> KernelHandle?
    /// Every handle with a descriptor, and its descriptor.
    var allDescriptors: [(KernelHandle, Int32)] { get }
    /// No watcher uses the directory of `wd` any more.
    func forget(_ wd: Int32)
    /// Handles resolved to directories outside every tree, so that an event there costs one lookup.
    func isOutside(_ handle: KernelHandle) -> Bool
    func markOutside(_ handle: KernelHandle)
    /// A directory moved into a tree, or a tree was added: what was outside may be inside now.
    func forgetOutside()
    /// The loop is stopping.
    func closeAll()
}

/// The descriptors a ``FileSystemMarkBackend`` gives directories: numbered from ``first`` up, so
/// that they never meet a ``DirectoryWatchBackend``'s (inotify numbers its watches upwards from 1,
/// and never reaches 2^30 in the life of an instance).
enum MarkedDescriptors {
    static let first: Int32 = 1 << 30

    static func contains(_ wd: Int32) -> Bool { wd >= first }
}

/// No backend that marks file systems: every tree is refused one (a router made without the
/// loop's, as the tests make it).
final class UnavailableMarks: FileSystemMarkBackend {
    var refusal: SyscallError?
    func openGroup() throws(SyscallError) { throw SyscallError(function: "mark", errno: ENOSYS) }
    func mark(_ path: FileSystemPath, directory: Int32, id: [UInt8], selecting mask: UInt32) throws(SyscallError)
        -> Bool
    {
        throw SyscallError(function: "mark", errno: ENOSYS)
    }
    func unmark(_ id: [UInt8]) {}
    func closeGroupIfUnused() {}
    func mountFD(for handle: KernelHandle) -> Int32? { nil }
    func descriptor(_ handle: KernelHandle) -> Int32? { nil }
    func descriptor(for handle: KernelHandle) -> Int32 { preconditionFailure("nothing is marked") }
    func handle(_ wd: Int32) -> KernelHandle? { nil }
    var allDescriptors: [(KernelHandle, Int32)] { [] }
    func forget(_ wd: Int32) {}
    func isOutside(_ handle: KernelHandle) -> Bool { true }
    func markOutside(_ handle: KernelHandle) {}
    func forgetOutside() {}
    func closeAll() {}
}
