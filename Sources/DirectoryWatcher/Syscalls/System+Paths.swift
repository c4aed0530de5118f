import CDirectoryWatcherShims
import Glibc

/// Paths: the current directory, links, directories opened along paths of any length, and the
/// few files under `/proc` and `/sys` the library reads.
extension System {
    /// The process's current directory. The corresponding C function is `getcwd`.
    func currentDirectory() throws(SyscallError) -> FileSystemPath {
        var size = 4096
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            let result = buffer.withUnsafeMutableBufferPointer { calls.getcwd($0.baseAddress!, size) }
            if result != nil {
                return FileSystemPath(bytes: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) })
            }
            let code = Glibc.errno
            if code == ERANGE && size < 1 << 20 {
                size *= 4
                continue
            }
            if code == EINTR { continue }
            // Past PATH_MAX the getcwd system call gives up (glibc then walks up itself, other C
            // libraries do not).
            if code == ENAMETOOLONG { return try currentDirectoryWalkingUp() }
            throw SyscallError(function: "getcwd", errno: code)
        }
    }

    /// The current directory's path found as getcwd(3) finds it without the kernel's help: from
    /// the directory up through `..` to `/`, each directory's name read from its parent's listing
    /// (the entry with its device and inode). Each directory on the way must be readable.
    private func currentDirectoryWalkingUp() throws(SyscallError) -> FileSystemPath {
        let dot = Array(".".utf8)
        var directory = try openDirectory(at: AT_FDCWD, dot[...], options: CDW_OPEN_PATH_ONLY)
        defer { close(directory) }
        guard let root = try entryStatus(in: AT_FDCWD, name: Array("/".utf8)),
            var here = try entryStatus(in: directory, name: dot)
        else { throw SyscallError(function: "getcwd", errno: ENOENT) }
        var names: [[UInt8]] = []
        while here.device != root.device || here.inode != root.inode {
            let parent = try openDirectory(at: directory, Array("..".utf8)[...], options: 0)
            close(directory)
            directory = parent
            guard let above = try entryStatus(in: parent, name: dot) else {
                throw SyscallError(function: "getcwd", errno: ENOENT)
            }
            // Its own parent: the root of a chroot or of a mount namespace, where `/` leads.
            if above.device == here.device && above.inode == here.inode { break }
            // No entry of the parent is this directory: it was removed, as getcwd then says.
            guard let name = try entryName(of: here, in: parent) else {
                throw SyscallError(function: "getcwd", errno: ENOENT)
            }
            names.append(name)
            here = above
        }
        var path: [UInt8] = []
        for name in names.reversed() {
            path.append(UInt8(ascii: "/"))
            path += name
        }
        return FileSystemPath(bytes: path.isEmpty ? Array("/".utf8) : path)
    }

    /// The name under which the directory `directory` (open for reading) holds the directory
    /// `target`. The listing's inode is tried first; every subdirectory after, since a mount
    /// point's entry (and an overlay's) lists another inode than the directory it leads to.
    private func entryName(of target: EntryStatus, in directory: Int32) throws(SyscallError) -> [UInt8]? {
        var likely: [[UInt8]] = []
        var others: [[UInt8]] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let count = try readDirectory(directory, into: buffer)
            if count == 0 { break }
            DirectoryEntryParser.forEach(UnsafeRawBufferPointer(rebasing: buffer[..<count])) { name, inode, type in
                if inode == target.inode {
                    likely.append(Array(name))
                } else if DirectoryEntryParser.kind(type) ?? .directory == .directory {
                    others.append(Array(name))
                }
            }
        }
        for name in likely + others {
            if let status = try entryStatus(in: directory, name: name), status.device == target.device,
                status.inode == target.inode
            {
                return name
            }
        }
        return nil
    }

    /// The target of the symbolic link at `path`; nil when `path` is not a symbolic link
    /// (`EINVAL`) or names nothing (`ENOENT`). The corresponding C function is `readlink`.
    func symbolicLinkTarget(_ path: FileSystemPath) throws(SyscallError) -> FileSystemPath? {
        if Self.isTooLong(path) {
            // Through its directory, opened in steps: `/proc/self/fd/N/name` is short, and the
            // kernel reads the link named by its last component without following it.
            let parent: Int32
            do {
                parent = try openDirectoryReference(path.parent, followingLinks: true)
            } catch  where error.errno == ENOENT {
                return nil
            }
            defer { close(parent) }
            return try symbolicLinkTarget(FileSystemPath("/proc/self/fd/\(parent)").appending(path.lastComponent))
        }
        var size = 256
        while true {
            var buffer = [CChar](repeating: 0, count: size)
            let count = path.withCString { pointer in
                buffer.withUnsafeMutableBufferPointer { calls.readlink(pointer, $0.baseAddress!, size) }
            }
            if count >= 0 && count < size {
                return FileSystemPath(bytes: buffer[..<count].map { UInt8(bitPattern: $0) })
            }
            if count >= 0 && size < 1 << 16 {
                size *= 4  // possibly truncated: try a larger buffer
                continue
            }
            let code = count >= 0 ? ENAMETOOLONG : Glibc.errno
            if code == EINTR { continue }
            if code == EINVAL || code == ENOENT { return nil }
            throw SyscallError(function: "readlink", errno: code)
        }
    }

    /// Opens the directory at `path` for listing. The corresponding C function is `open`, with
    /// `O_DIRECTORY`.
    /// Opens a directory to list it (and, for a tree, to watch exactly the directory listed).
    /// Not following links, a symbolic link at `path` is refused with `ELOOP`. A path too long
    /// for one system call (``isTooLong(_:)``) is opened in steps.
    func openDirectory(_ path: FileSystemPath, followingLinks: Bool = true) throws(SyscallError) -> Int32 {
        if Self.isTooLong(path) {
            return try openInSteps(path, options: followingLinks ? 0 : CDW_OPEN_NO_FOLLOW)
        }
        return try path.withCString { pointer throws(SyscallError) in
            try retrying("open") { calls.openDirectory(pointer, !followingLinks) }
        }
    }

    /// Whether `path` is too long for a system call: PATH_MAX bytes with its NUL, though the
    /// directory it names may be as deep as any.
    static func isTooLong(_ path: FileSystemPath) -> Bool {
        path.bytes.count >= Int(PATH_MAX)
    }

    /// Opens the directory at `path` with `O_PATH`, in steps: a descriptor that names the
    /// directory without reading it, to watch it through `/proc/self/fd` when its path is too long
    /// for `inotify_add_watch`. Unlike an open for reading, it raises no event on the directory,
    /// and needs search permission only.
    func openDirectoryReference(_ path: FileSystemPath, followingLinks: Bool) throws(SyscallError) -> Int32 {
        try openInSteps(path, options: CDW_OPEN_PATH_ONLY | (followingLinks ? 0 : CDW_OPEN_NO_FOLLOW))
    }

    /// Opens the directory at `path`, of any length, with `options` (``SystemCalls/openDirectoryAt``):
    /// each step opens with `O_PATH` as many whole components as fit in a system call, relative to
    /// the directory the step before reached; the last opens the directory itself. The kernel
    /// resolves links and `..` within each step, and so along the path, as in one lookup.
    private func openInSteps(_ path: FileSystemPath, options: Int32) throws(SyscallError) -> Int32 {
        let bytes = path.bytes
        let slash = UInt8(ascii: "/")
        let longest = Int(PATH_MAX) - 1
        var directory = AT_FDCWD
        defer { if directory != AT_FDCWD { close(directory) } }
        var start = 0
        while bytes.count - start > longest {
            // Up to the last slash that fits; none past the start: one name longer than a path.
            guard let cut = bytes[start..<(start + longest)].lastIndex(of: slash), cut > start else {
                throw SyscallError(function: "open", errno: ENAMETOOLONG)
            }
            let reached = try openDirectory(at: directory, bytes[start..<cut], options: CDW_OPEN_PATH_ONLY)
            if directory != AT_FDCWD { close(directory) }
            directory = reached
            // The rest is relative to `reached`: a slash left at its start would make it absolute.
            start = cut + 1
            while start < bytes.count && bytes[start] == slash { start += 1 }
        }
        return try openDirectory(
            at: directory, start < bytes.count ? bytes[start...] : [UInt8(ascii: ".")][...], options: options)
    }

    /// `openat` of the directory `path` relative to `directory` (`AT_FDCWD`: the current one).
    private func openDirectory(at directory: Int32, _ path: ArraySlice<UInt8>, options: Int32) throws(SyscallError)
        -> Int32
    {
        try FileSystemPath(bytes: path).withCString { pointer throws(SyscallError) in
            try retrying("open") { calls.openDirectoryAt(directory, pointer, options) }
        }
    }

    /// The per-user limit on inotify watches, read from `/proc`; nil when it cannot be read. For
    /// messages: a tree that reaches it says how far it got. The lower of the machine's
    /// (`fs.inotify.max_user_watches`) and the user namespace's (`user.max_inotify_watches`,
    /// which a container or `unshare --user` may lower, and which the kernel checks too); in the
    /// first namespace the two are one setting.
    func watchLimit() -> Int? {
        let limits = ["/proc/sys/fs/inotify/max_user_watches", "/proc/sys/user/max_inotify_watches"].compactMap {
            readNumber(FileSystemPath($0))
        }
        return limits.min()
    }

    /// The decimal number a `/proc` file starts with; nil when it cannot be read.
    private func readNumber(_ file: FileSystemPath) -> Int? {
        guard
            let fd = try? file.withCString({ pointer throws(SyscallError) in
                try retrying("open") { calls.openFile(pointer) }
            })
        else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { calls.read(fd, $0.baseAddress!, $0.count) }
        guard count > 0 else { return nil }
        return Int(String(decoding: bytes[..<count].prefix { $0 >= 0x30 && $0 <= 0x39 }, as: UTF8.self))
    }

    /// The magic number of the file system that holds `path` (`statfs`'s `f_type`).
    func fileSystemType(_ path: FileSystemPath) throws(SyscallError) -> UInt64 {
        let type = try path.withCString { pointer throws(SyscallError) in
            try retrying("statfs") { calls.fileSystemType(pointer) }
        }
        return UInt64(type)
    }

    /// A small file of `/proc` read whole (`mountinfo`), as text; nil when it cannot be read.
    func readProcFile(_ path: String) -> String? {
        readProcBytes(path).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A `/proc` file's bytes, as ``readProcFile(_:)`` reads them, with no decoding (a mount
    /// point need not be UTF-8); nil when it cannot be opened.
    func readProcBytes(_ path: String) -> [UInt8]? {
        guard
            let fd = try? FileSystemPath(path).withCString({ pointer throws(SyscallError) in
                try retrying("open") { calls.openFile(pointer) }
            })
        else { return nil }
        defer { close(fd) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { calls.read(fd, $0.baseAddress!, $0.count) }
            if count == -1 && Glibc.errno == EINTR { continue }
            guard count > 0 else { break }
            contents += chunk[..<count]
        }
        return contents
    }
}
