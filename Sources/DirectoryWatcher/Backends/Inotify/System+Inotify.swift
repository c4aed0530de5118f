import Glibc

/// inotify's system calls.
extension System {
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
}
