import CDirectoryWatcherShims
import Glibc

/// Whole files read and replaced, for saved states: a replacement is atomic, and durable once
/// it returns (a new file beside the old, `fsync`, `rename` over the old, the directory synced),
/// so a crash at any point leaves the old file or the new one, never a mix.
///
/// These go straight to the C library rather than through the replaceable table: they are the
/// caller's file, not the watch, and the simulated kernel has no files of this kind.
extension System {
    /// The file's bytes; nil when no file has that name (`ENOENT`).
    func readFile(_ path: FileSystemPath) throws(SyscallError) -> [UInt8]? {
        try readFile(opened: path.withCString { Glibc.open($0, O_RDONLY | O_CLOEXEC) })
    }

    /// The bytes of the file `name` of the directory open as `directory` (a `.gitignore`, read
    /// with its directory's listing: the directory's own, whatever renames its path meanwhile);
    /// nil when it has no entry by that name.
    func readFile(named name: [UInt8], in directory: Int32) throws(SyscallError) -> [UInt8]? {
        let terminated = name + [0]
        return try readFile(
            opened: terminated.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) {
                    Glibc.openat(directory, $0.baseAddress!, O_RDONLY | O_CLOEXEC)
                }
            })
    }

    private func readFile(opened fd: Int32) throws(SyscallError) -> [UInt8]? {
        if fd == -1 {
            if errno == ENOENT { return nil }
            throw SyscallError(function: "open", errno: errno)
        }
        defer { Glibc.close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw SyscallError(function: "fstat", errno: errno) }
        guard status.st_mode & S_IFMT == S_IFREG else { throw SyscallError(function: "open", errno: EISDIR) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(status.st_size))
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count == -1 {
                if errno == EINTR { continue }
                throw SyscallError(function: "read", errno: errno)
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    /// Replaces the file at `path` with `bytes`, atomically and durably. On failure the old file
    /// is untouched and the new one removed.
    func replaceFile(_ path: FileSystemPath, with bytes: [UInt8]) throws(SyscallError) {
        let directory = path.parent
        let temporary = FileSystemPath(
            bytes: path.bytes + Array(".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))".utf8))
        let fd = temporary.withCString { Glibc.open($0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600) }
        guard fd != -1 else { throw SyscallError(function: "open", errno: errno) }
        var failure: SyscallError?
        var written = 0
        while failure == nil && written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if count == -1 {
                if errno != EINTR { failure = SyscallError(function: "write", errno: errno) }
            } else {
                written += count
            }
        }
        if failure == nil && fsync(fd) != 0 { failure = SyscallError(function: "fsync", errno: errno) }
        // A close can report a delayed write error (NFS): the file is not known good until it returns.
        if Glibc.close(fd) != 0 && failure == nil && errno != EINTR {
            failure = SyscallError(function: "close", errno: errno)
        }
        if failure == nil {
            let renamed = temporary.withCString { from in path.withCString { to in Glibc.rename(from, to) } }
            if renamed != 0 { failure = SyscallError(function: "rename", errno: errno) }
        }
        if let failure {
            _ = temporary.withCString { unlink($0) }
            throw failure
        }
        // The rename is durable once the directory is synced.
        let directoryFD = directory.withCString { Glibc.open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard directoryFD != -1 else { throw SyscallError(function: "open", errno: errno) }
        defer { Glibc.close(directoryFD) }
        if fsync(directoryFD) != 0 && errno != EINVAL { throw SyscallError(function: "fsync", errno: errno) }
    }
}

extension System {
    /// Opens `path` for appending, creating it (mode 0600); emptied first when `truncating`.
    func openForAppending(_ path: FileSystemPath, truncating: Bool) throws(SyscallError) -> Int32 {
        let flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncating ? O_TRUNC : 0)
        let fd = path.withCString { Glibc.open($0, flags, 0o600) }
        guard fd != -1 else { throw SyscallError(function: "open", errno: errno) }
        return fd
    }

    /// Appends `bytes` to the file open as `fd`, all of them (a write cut short is continued).
    func append(_ bytes: [UInt8], to fd: Int32) throws(SyscallError) {
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if count == -1 {
                if errno == EINTR { continue }
                throw SyscallError(function: "write", errno: errno)
            }
            written += count
        }
    }
}

extension System {
    /// Files larger than this are not read for a digest (``contentDigest(of:)``).
    static let largestDigestedFile: Int64 = 64 << 20

    /// The size and digest of the regular file at `path`, for a settling watcher that compares
    /// content (``ContentMemory``); nil when it is not a regular file, cannot be read, is larger
    /// than ``largestDigestedFile``, or changes size while it is read.
    ///
    /// Straight to the C library, as ``readFile(_:)``: the simulated kernel has no file contents
    /// (a simulated watcher finds no file here, and so drops no write). `O_NONBLOCK`, so that a
    /// fifo does not hold the loop; `O_NOATIME` where the file's owner allows it, so that the read
    /// changes nothing a watcher sees but an open and a close.
    func contentDigest(of path: FileSystemPath) -> ContentDigest? {
        let flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW
        var fd = path.withCString { Glibc.open($0, flags | cdw_open_no_access_time()) }
        if fd == -1 && errno == EPERM { fd = path.withCString { Glibc.open($0, flags) } }
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG,
            status.st_size <= Self.largestDigestedFile
        else { return nil }
        var hasher = Hasher()
        var size: Int64 = 0
        let chunkSize = 1 << 16
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { chunk.deallocate() }
        while true {
            let count = Glibc.read(fd, chunk.baseAddress, chunkSize)
            if count == -1 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { break }
            hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: chunk[..<count]))
            size += Int64(count)
            if size > Self.largestDigestedFile { return nil }
        }
        guard size == status.st_size else { return nil }
        return ContentDigest(size: size, hash: hasher.finalize())
    }
}

/// A file's size and a 64-bit digest of its bytes (Swift's `Hasher`, seeded anew in each
/// process: digests are compared within one process only, never kept).
struct ContentDigest: Hashable, Sendable {
    var size: Int64
    var hash: Int
}
