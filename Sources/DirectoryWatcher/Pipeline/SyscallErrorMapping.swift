import Glibc

extension DirectoryWatcherError {
    /// The public error for a failed system call, naming the path the caller gave. Which `errno`
    /// means what depends on the call: `ENOSPC` from `inotify_add_watch` is the watch limit, not
    /// a full disk; `EMFILE` from `inotify_init1` is the instance limit, unless the process was
    /// out of descriptors too.
    init(_ error: SyscallError, path: FileSystemPath, detail: String? = nil) {
        let code: Code
        switch (error.errno, error.function) {
        case _ where error.refusesBackend: code = .backendUnavailable
        case (ENOENT, _): code = .noSuchPath
        case (ENOTDIR, _): code = .notADirectory
        case (EACCES, _), (EPERM, _): code = .permissionDenied
        case (ENAMETOOLONG, _): code = .nameTooLong
        case (ELOOP, _): code = .symbolicLinkLoop
        case (ENOSPC, "inotify_add_watch"): code = .watchLimitReached
        case (EMFILE, "inotify_init1") where !error.processOutOfDescriptors: code = .instanceLimitReached
        case (EMFILE, _), (ENFILE, _): code = .descriptorLimitReached
        case (ENOMEM, _): code = .outOfMemory
        default: code = .other(errno: error.errno)
        }
        self.init(code: code, path: path, function: error.function, errno: error.errno, detail: detail ?? error.detail)
    }
}
