import Glibc

/// The fanotify backend: a group's marks and the table from a directory's file handle to the
/// descriptor the router knows it by, and what its records mean. Loop thread only.
///
/// One mark covers a whole file system (`FAN_MARK_FILESYSTEM`), so a tree on it costs no kernel
/// watch per directory. Its events name a directory by its file handle: the table maps each
/// handle met to a descriptor of the same kind as inotify's watch descriptors, numbered from
/// ``MarkedDescriptors/first`` so the two never meet, and the router's watch table, trees and kept
/// directories serve both. Handles of directories outside every watched tree are remembered as
/// such (``outside``), so an event elsewhere on the file system costs one hash lookup, and none
/// when it comes from the directory the last record named (``MarkedTrees`` keeps that one).
final class FanotifyBackend: FileSystemMarkBackend {
    /// One marked file system.
    struct Mark {
        /// The mount point of the first watched root's mount, open: `open_by_handle_at`
        /// resolves handles against it, and the paths of what it opens are on that mount.
        let mountFD: Int32
        var mask: UInt64
        /// Watchers using the mark.
        var users: Int
    }

    let system: System
    /// The group, once opened (`open`: the loop opens it and reads it beside inotify).
    private(set) var fd: Int32 = -1
    /// Opens the group and registers it with the loop's epoll; called once, on first use.
    var open: () throws(SyscallError) -> Int32 = { () throws(SyscallError) in
        throw SyscallError(function: "fanotify_init", errno: ENOSYS)
    }
    /// Closes the group (the loop stops reading it); called once no tree uses it.
    var close: () -> Void = {}
    /// Why marking a file system was refused for want of `CAP_SYS_ADMIN`: later trees are refused
    /// at once, with no group opened for nothing (an unprivileged process can open one, and mark
    /// nothing with it).
    var refusal: SyscallError?
    /// Marked file systems, by id.
    private(set) var marks: [[UInt8]: Mark] = [:]
    // The loop's leader alone reads and changes the tables (the protocol's "loop thread only"):
    // the runtime's exclusivity checks, two for each record whose handle is looked up, would
    // only cost time.
    @exclusivity(unchecked) private var descriptors: [KernelHandle: Int32] = [:]
    @exclusivity(unchecked) private var handles = ByDescriptor<KernelHandle>()
    private var next = MarkedDescriptors.first
    /// Handles resolved to directories outside every watched tree. Bounded: past
    /// ``outsideLimit`` it starts again empty (a cache, whose misses cost a resolution).
    @exclusivity(unchecked) private(set) var outside: Set<KernelHandle> = []
    static let outsideLimit = 65_536

    init(system: System) { self.system = system }

    /// Opens the group if it is not open yet.
    func openGroup() throws(SyscallError) {
        if fd < 0 { fd = try open() }
    }

    /// Marks the file system of `path` (whose id is `id`) for a watcher that selected `selected`
    /// (``FanotifyTranslation/markMask(selecting:)``), or adds to its mark; the
    /// mark takes `directory` (its mount point, open) as its mount descriptor when it is new, and
    /// otherwise the caller keeps (and closes) it. Returns whether the mark took it.
    func mark(
        _ path: FileSystemPath, directory: Int32, id: [UInt8], selecting selected: UInt32
    ) throws(SyscallError) -> Bool {
        let mask = FanotifyTranslation.markMask(selecting: selected)
        if var existing = marks[id] {
            if existing.mask | mask != existing.mask {
                try system.fanotifyMark(fd, fileSystemOf: path, mask: mask, add: true)
                existing.mask |= mask
            }
            existing.users += 1
            marks[id] = existing
            return false
        }
        try system.fanotifyMark(fd, fileSystemOf: path, mask: mask, add: true)
        marks[id] = Mark(mountFD: directory, mask: mask, users: 1)
        return true
    }

    /// A watcher of the file system `id` leaves: the last one removes the mark.
    func unmark(_ id: [UInt8]) {
        guard var mark = marks[id] else { return }
        mark.users -= 1
        if mark.users > 0 {
            marks[id] = mark
            return
        }
        marks[id] = nil
        let path = FileSystemPath("/proc/self/fd/\(mark.mountFD)")
        // The file system may be gone (unmounted): its mark went with it.
        try? system.fanotifyMark(fd, fileSystemOf: path, mask: mark.mask, add: false)
        system.close(mark.mountFD)
        outside = outside.filter { Array($0.fileSystemID) != id }
        closeGroupIfUnused()
    }

    /// With no mark left, the group goes: a process whose trees have all ended holds no fanotify
    /// group, as one that watches nothing holds no inotify instance.
    func closeGroupIfUnused() {
        guard fd >= 0, marks.isEmpty else { return }
        close()
        fd = -1
        outside = []
    }

    func mountFD(for handle: KernelHandle) -> Int32? {
        marks[Array(handle.fileSystemID)]?.mountFD
    }

    /// The descriptor of a directory's handle, if it has one. (The router keeps the last one it
    /// was given, ``MarkedTrees``: the events of a read come mostly from one directory.)
    func descriptor(_ handle: KernelHandle) -> Int32? { descriptors[handle] }

    /// The descriptor of `handle`, given now if it has none.
    func descriptor(for handle: KernelHandle) -> Int32 {
        if let wd = descriptors[handle] { return wd }
        let wd = next
        next += 1
        descriptors[handle] = wd
        handles[wd] = handle
        outside.remove(handle)
        return wd
    }

    /// The handle a descriptor stands for.
    func handle(_ wd: Int32) -> KernelHandle? { handles[wd] }

    /// Every handle with a descriptor, and its descriptor.
    var allDescriptors: [(KernelHandle, Int32)] { descriptors.map { ($0.key, $0.value) } }

    /// No watcher uses the directory of `wd` any more.
    func forget(_ wd: Int32) {
        guard let handle = handles.removeValue(forKey: wd) else { return }
        descriptors[handle] = nil
    }

    func isOutside(_ handle: KernelHandle) -> Bool { outside.contains(handle) }

    func markOutside(_ handle: KernelHandle) {
        if outside.count >= Self.outsideLimit { outside = [] }
        outside.insert(handle)
    }

    /// A directory moved into a tree, or a tree was added: what was outside may be inside now.
    func forgetOutside() {
        if !outside.isEmpty { outside = [] }
    }

    /// The loop is stopping: the mount descriptors close (the group is the loop's to close).
    func closeAll() {
        for mark in marks.values { system.close(mark.mountFD) }
        marks = [:]
        descriptors = [:]
        handles = ByDescriptor()
        outside = []
    }
}
