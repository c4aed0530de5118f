import CDirectoryWatcherShims
import Glibc

/// fanotify's calls: a group, and a file system's mark.
extension System {
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
}
