import Glibc

/// Why a directory could not be watched.
///
/// Every error names the path it is about and says what to do, in ``description``:
///
/// ```
/// cannot watch "/srv/uploads": no such file or directory
/// cannot watch "/srv/a.txt": not a directory
/// cannot watch "/srv/deep": the inotify watch limit is reached (fs.inotify.max_user_watches); …
/// ```
public struct DirectoryWatcherError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The cause, in a form to compare with (``DirectoryWatcherError/code``): one of the static
    /// members below. A struct rather than an enum, so that a later release can add a cause
    /// without breaking a `switch`: compare with `==`, or `switch` with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Value: Hashable, Sendable {
            case emptyPath
            case notAnEntry
            case noSuchPath
            case notADirectory
            case permissionDenied
            case nameTooLong
            case symbolicLinkLoop
            case watchLimitReached
            case instanceLimitReached
            case descriptorLimitReached
            case outOfMemory
            case invalidOption
            case invalidated
            case backendUnavailable
            case savedStateUnusable
            case savedStateNotWritten
            case other(Int32)
        }

        let value: Value

        init(_ value: Value) { self.value = value }

        /// The path was the empty string.
        public static let emptyPath = Code(.emptyPath)
        /// A file watch was asked of a path that names no entry of a directory: `/`, or a path
        /// ending in `..`.
        public static let notAnEntry = Code(.notAnEntry)
        /// Nothing exists at the path, or a component of it is missing (`ENOENT`).
        public static let noSuchPath = Code(.noSuchPath)
        /// The path, or a component of it, is not a directory (`ENOTDIR`).
        public static let notADirectory = Code(.notADirectory)
        /// Search or read permission is missing on the path or a component (`EACCES`).
        public static let permissionDenied = Code(.permissionDenied)
        /// The path or one of its components is longer than the system allows (`ENAMETOOLONG`).
        public static let nameTooLong = Code(.nameTooLong)
        /// Too many symbolic links were met while resolving the path, often a loop (`ELOOP`).
        public static let symbolicLinkLoop = Code(.symbolicLinkLoop)
        /// The per-user limit on inotify watches is reached (`ENOSPC` from `inotify_add_watch`).
        /// Not a full disk: raise `fs.inotify.max_user_watches`.
        public static let watchLimitReached = Code(.watchLimitReached)
        /// The per-user limit on inotify instances is reached (`EMFILE` from `inotify_init1`
        /// while the process could still open other descriptors). Raise
        /// `fs.inotify.max_user_instances`.
        public static let instanceLimitReached = Code(.instanceLimitReached)
        /// The process is out of descriptors (`EMFILE`: its limit, `RLIMIT_NOFILE`, which
        /// `ulimit -n` shows and `LimitNOFILE=` sets for a systemd service), or the system is
        /// (`ENFILE`: `fs.file-max`). ``DirectoryWatcherError/errno`` says which.
        public static let descriptorLimitReached = Code(.descriptorLimitReached)
        /// The kernel could not allocate memory (`ENOMEM`).
        public static let outOfMemory = Code(.outOfMemory)
        /// An option given to the watcher cannot be used (a settling quiet period of zero);
        /// ``DirectoryWatcherError/detail`` says which and why.
        public static let invalidOption = Code(.invalidOption)
        /// ``DirectoryWatcher/startMonitoring()`` was called on a watcher after
        /// ``DirectoryWatcher/invalidate()``, which ends it for good. Use
        /// ``DirectoryWatcher/stopMonitoring()`` to stop a watcher that is to start again.
        public static let invalidated = Code(.invalidated)
        /// The backend asked for (``DirectoryWatcher/Options/backend``) cannot watch this path:
        /// fanotify without `CAP_SYS_ADMIN`, on a file system without file handles, or with a
        /// mount inside the tree. ``DirectoryWatcherError/detail`` says which.
        public static let backendUnavailable = Code(.backendUnavailable)
        /// The saved state file (``DirectoryWatcher/Options/savedState``, named by
        /// ``DirectoryWatcherError/path``) is there but cannot be started from: not a state,
        /// another format version, truncated, corrupt, another directory's, or unreadable.
        /// ``DirectoryWatcherError/detail`` says which. The file is left as it is.
        public static let savedStateUnusable = Code(.savedStateUnusable)
        /// The state could not be saved to its file (``DirectoryWatcherError/path``): its folder
        /// is read-only or missing, the disk is full. The file as it was is left intact.
        public static let savedStateNotWritten = Code(.savedStateNotWritten)
        /// Any other failure, with its `errno`.
        public static func other(errno: Int32) -> Code { Code(.other(errno)) }

        /// The cause's name, as the static member that gives it is named (`permissionDenied`,
        /// `other(errno: 5)`).
        public var description: String {
            if case .other(let errno) = value { return "other(errno: \(errno))" }
            return "\(value)"
        }
    }

    public let code: Code
    /// The path as the caller gave it (for a directory of a tree, that directory's path).
    public let path: FileSystemPath
    /// The system call that failed, for example `inotify_add_watch`; nil when none did
    /// (``Code/emptyPath``, ``Code/notAnEntry``, and a chain of symbolic links longer than the
    /// kernel follows, found while resolving a file watch).
    public let function: String?
    /// The `errno` value behind the error; nil for ``Code/emptyPath`` and ``Code/notAnEntry``.
    public let errno: Int32?
    /// What else the library knows of the failure, in words: for the watch limit reached
    /// part-way through a tree, how many of its directories could not be watched with this one
    /// (when others could not), how many are watched, and what the limit is. Part of ``reason``.
    public let detail: String?

    public init(
        code: Code, path: FileSystemPath, function: String? = nil, errno: Int32? = nil, detail: String? = nil
    ) {
        self.code = code
        self.path = path
        self.function = function
        self.errno = errno
        self.detail = detail
    }

    /// What went wrong and what to do, naming the path.
    public var description: String {
        switch code.value {
        case .savedStateUnusable: return "cannot start from the saved state \(quoted(path.description)): \(reason)"
        case .savedStateNotWritten: return "cannot save the state to \(quoted(path.description)): \(reason)"
        default: return "cannot watch \(quoted(path.description)): \(reason)"
        }
    }

    /// The cause in words, without the path: what ``description`` says after it.
    public var reason: String {
        guard let detail else { return cause }
        return cause + " (" + detail + ")"
    }

    private var cause: String {
        switch code.value {
        case .emptyPath: return "the path is empty; pass a directory such as \".\""
        case .notAnEntry: return "not a file in a directory (a file watch needs a path such as \"dir/name\")"
        case .noSuchPath: return "no such file or directory"
        case .notADirectory: return "not a directory (a path component, or the path itself, is a file)"
        case .permissionDenied: return "permission denied; the directory must be readable and searchable"
        case .nameTooLong: return "the path or one of its names is too long"
        case .symbolicLinkLoop: return "too many levels of symbolic links (is there a link loop?)"
        case .watchLimitReached:
            return "the inotify watch limit is reached (fs.inotify.max_user_watches); this is not a full disk: "
                + "raise the limit, for example `sysctl fs.inotify.max_user_watches=524288`"
        case .instanceLimitReached:
            return "the inotify instance limit is reached (fs.inotify.max_user_instances): other programs of "
                + "this user hold the instances; raise the limit, for example `sysctl fs.inotify.max_user_instances=1024`"
        case .descriptorLimitReached where errno == ENFILE:
            return "the system's limit on open files is reached (fs.file-max); close files elsewhere or raise "
                + "the limit, for example `sysctl fs.file-max=2097152`"
        case .descriptorLimitReached:
            return "this process's limit on open descriptors is reached (RLIMIT_NOFILE, `ulimit -n`); close "
                + "some or raise the limit: `ulimit -n 65536` in the shell that starts the program, "
                + "`LimitNOFILE=65536` in its systemd unit"
        case .outOfMemory: return "the kernel is out of memory"
        case .invalidOption: return "an option cannot be used"
        case .backendUnavailable: return "the backend asked for cannot watch it"
        case .savedStateUnusable: return "the file cannot be used"
        case .savedStateNotWritten where errno != nil:
            return "\(function ?? "system call") failed: \(Self.describe(errno: errno!))"
        case .savedStateNotWritten: return "the state could not be written"
        case .invalidated:
            return "the watcher was invalidated, which ends it for good; make a new one "
                + "(stopMonitoring() stops a watcher that is to start again)"
        case .other(let code): return "\(function ?? "system call") failed: \(Self.describe(errno: code))"
        }
    }

    /// `strerror` text with the symbolic name, for example `No such file or directory (ENOENT)`.
    static func describe(errno code: Int32) -> String {
        let text = String(cString: strerror(code))
        if let name = symbolicNames[code] { return "\(text) (\(name))" }
        return "\(text) (errno \(code))"
    }

    private static let symbolicNames: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EINTR: "EINTR", EIO: "EIO", EBADF: "EBADF", EAGAIN: "EAGAIN",
        ENOMEM: "ENOMEM", EACCES: "EACCES", EFAULT: "EFAULT", EEXIST: "EEXIST", ENOTDIR: "ENOTDIR",
        EINVAL: "EINVAL", ENFILE: "ENFILE", EMFILE: "EMFILE", ENOSPC: "ENOSPC", ENAMETOOLONG: "ENAMETOOLONG",
        ELOOP: "ELOOP", EROFS: "EROFS", EISDIR: "EISDIR", ENOSYS: "ENOSYS",
    ]

    /// The path in quotes, with control characters escaped so a message stays on one line.
    private func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                result += "\\u{" + String(scalar.value, radix: 16) + "}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
