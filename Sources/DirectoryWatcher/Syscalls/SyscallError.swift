import Glibc

/// A failed system call: which function failed and the `errno` it left.
///
/// Internal: the public surface turns these into ``DirectoryWatcherError``, which names the path.
struct SyscallError: Error, Equatable, CustomStringConvertible {
    /// The C function that failed, for example `inotify_add_watch`.
    var function: String
    /// The value of `errno` right after the call.
    var errno: Int32

    var description: String { "\(function): \(SyscallError.describe(errno))" }

    /// `strerror` text with the symbolic name, for example `No such file or directory (ENOENT)`.
    static func describe(_ code: Int32) -> String {
        DirectoryWatcherError.describe(errno: code)
    }
}
