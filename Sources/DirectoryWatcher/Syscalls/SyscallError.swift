import Glibc

/// A failed system call: which function failed and the `errno` it left.
///
/// Internal: the public surface turns these into ``DirectoryWatcherError``, which names the path.
struct SyscallError: Error, Equatable, CustomStringConvertible {
    /// The C function that failed, for example `inotify_add_watch`.
    var function: String
    /// The value of `errno` right after the call.
    var errno: Int32
    /// For `EMFILE` from `inotify_init1`: the process is out of descriptors (RLIMIT_NOFILE), not
    /// the user out of inotify instances (``System/inotifyInit()`` looks).
    var processOutOfDescriptors = false
    /// What the library knows of why, in words, when the errno alone would mislead: why fanotify
    /// cannot watch a tree.
    var detail: String?
    /// The backend asked for refuses the watch (``detail`` says why): not a failed call of the
    /// file system's, whatever its errno.
    var refusesBackend = false

    var description: String { "\(function): \(SyscallError.describe(errno))" }

    /// `strerror` text with the symbolic name, for example `No such file or directory (ENOENT)`.
    static func describe(_ code: Int32) -> String {
        DirectoryWatcherError.describe(errno: code)
    }
}
