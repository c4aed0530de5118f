/// The inotify backend's watches: one `inotify_add_watch` per directory, on the loop's one
/// inotify descriptor, whose records the loop reads (``InotifyEventParser``) and hands over as
/// they are: inotify's bits are ``EventMask``'s.
struct InotifyBackend: DirectoryWatchBackend {
    /// The inotify descriptor.
    let fd: Int32
    let system: System

    func watch(_ path: FileSystemPath, events: UInt32, followingLinks: Bool) throws(SyscallError) -> Int32 {
        // A path too long for inotify_add_watch (past PATH_MAX) is watched through a descriptor
        // opened in steps.
        if System.isTooLong(path) {
            let directory = try system.openDirectoryReference(path, followingLinks: followingLinks)
            defer { system.close(directory) }
            return try watch(openDirectory: directory, events: events)
        }
        let flags = InotifyFlags.directoryWatch | (followingLinks ? 0 : InotifyFlags.dontFollow)
        return try system.inotifyAddWatch(fd, path: path, mask: events | flags)
    }

    /// Through `/proc/self/fd`, a link the kernel follows to the open directory itself.
    func watch(openDirectory directory: Int32, events: UInt32) throws(SyscallError) -> Int32 {
        try system.inotifyAddWatch(
            fd, path: FileSystemPath("/proc/self/fd/\(directory)"), mask: events | InotifyFlags.directoryWatch)
    }

    func unwatch(_ descriptor: Int32) {
        // EINVAL means the kernel dropped the watch already (the directory is gone and its
        // IN_IGNORED is still queued): nothing is left to remove.
        try? system.inotifyRemoveWatch(fd, descriptor)
    }
}
