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
        let text = String(cString: strerror(code))
        if let name = symbolicNames[code] { return "\(text) (\(name))" }
        return "\(text) (errno \(code))"
    }

    private static let symbolicNames: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EINTR: "EINTR", EIO: "EIO", EBADF: "EBADF", EAGAIN: "EAGAIN",
        ENOMEM: "ENOMEM", EACCES: "EACCES", EFAULT: "EFAULT", EEXIST: "EEXIST", ENOTDIR: "ENOTDIR",
        EINVAL: "EINVAL", ENFILE: "ENFILE", EMFILE: "EMFILE", ENOSPC: "ENOSPC", ENAMETOOLONG: "ENAMETOOLONG",
        ELOOP: "ELOOP", EROFS: "EROFS",
    ]
}
