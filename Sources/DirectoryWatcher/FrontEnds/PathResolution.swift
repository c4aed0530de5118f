import Glibc

/// Turns the path a caller gave into what is watched: the absolute path, and for a file watch the
/// directory and the entry name it follows.
///
/// Pure but for the two facts it asks for, the current directory and a symbolic link's target,
/// which come from closures: the live ones call `getcwd` and `readlink` through ``System``, and
/// tests give fakes. Errors name the path as the caller gave it.
struct PathResolution {
    /// The process's current directory (`getcwd`).
    var currentDirectory: () throws(SyscallError) -> FileSystemPath
    /// The target of the symbolic link at a path; nil when the path is not a symbolic link or
    /// names nothing (`readlink`).
    var linkTarget: (FileSystemPath) throws(SyscallError) -> FileSystemPath?

    /// The kernel follows at most 40 symbolic links in one lookup (`ELOOP` past that).
    static let maximumLinks = 40

    init(
        currentDirectory: @escaping () throws(SyscallError) -> FileSystemPath,
        linkTarget: @escaping (FileSystemPath) throws(SyscallError) -> FileSystemPath?
    ) {
        self.currentDirectory = currentDirectory
        self.linkTarget = linkTarget
    }

    init(system: System) {
        self.init(
            currentDirectory: { () throws(SyscallError) in try system.currentDirectory() },
            linkTarget: { (path) throws(SyscallError) in try system.symbolicLinkTarget(path) })
    }

    /// `path` made absolute against the current directory and tidied lexically (`..` is kept:
    /// resolving it would need the file system, and through a link it means something else).
    func absolute(_ path: String) throws(DirectoryWatcherError) -> FileSystemPath {
        guard !path.isEmpty else { throw DirectoryWatcherError(code: .emptyPath, path: FileSystemPath(path)) }
        let given = FileSystemPath(path)
        if given.isAbsolute { return FileSystemPath.absolute(given, currentDirectory: "/") }
        do {
            return FileSystemPath.absolute(given, currentDirectory: try currentDirectory())
        } catch {
            throw DirectoryWatcherError(error, path: FileSystemPath(path))
        }
    }

    /// The directory and the entry name a file watch of `absolute` follows: a symbolic link at
    /// the end of the path is followed (a relative target from the link's directory), as the
    /// kernel would, up to ``maximumLinks``. `given` is the caller's spelling, for errors.
    func fileEntry(
        _ absolute: FileSystemPath, given: String
    ) throws(DirectoryWatcherError) -> (directory: FileSystemPath, name: [UInt8]) {
        var current = absolute
        for _ in 0...Self.maximumLinks {
            let name = current.lastComponent.bytes
            // "/" has no name in a directory; ".." is the parent itself, never an entry.
            guard !name.isEmpty, name != Array("..".utf8) else {
                throw DirectoryWatcherError(code: .notAnEntry, path: FileSystemPath(given))
            }
            let target: FileSystemPath?
            do {
                target = try linkTarget(current)
            } catch {
                throw DirectoryWatcherError(error, path: FileSystemPath(given))
            }
            guard let target else { return (current.parent, name) }
            current = FileSystemPath.absolute(target, currentDirectory: current.parent)
        }
        throw DirectoryWatcherError(code: .symbolicLinkLoop, path: FileSystemPath(given), errno: ELOOP)
    }
}
