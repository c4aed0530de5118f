import Foundation
import Glibc

/// A directory of its own under the system's temporary directory, for one test, removed with
/// everything in it when the fixture goes away (or at ``remove()``).
///
/// ```swift
/// let folder = try TemporaryDirectory()
/// let watcher = try DirectoryWatcher.watchFolder(path: folder.path, delegate: model)
/// let changes = try await watcher.changes { try folder.createFile("a.txt") }
/// assertChanges(changes, [.created("a.txt")], under: folder.path)
/// ```
///
/// Paths given to its methods are relative to it. Every method throws the system's error, with
/// the path, rather than stopping the test.
public final class TemporaryDirectory: Sendable {
    /// Its absolute path, with no symbolic link in it (as a watcher reports paths).
    public let path: String

    /// Makes a new, empty directory under `TMPDIR` (or `/tmp`), named from `prefix`.
    public init(prefix: String = "DirectoryWatcherTesting") throws {
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw TemporaryDirectoryError(path: "\(base)/\(prefix).XXXXXX", action: "could not be made", errno: errno)
        }
        let resolved = realpath(made, nil)
        defer { free(resolved) }
        path = resolved.map { String(cString: $0) } ?? String(cString: made)
    }

    deinit {
        remove()
    }

    /// The absolute path of `relativePath` inside it.
    public func path(_ relativePath: String) -> String {
        relativePath.isEmpty ? path : path + "/" + relativePath
    }

    /// Makes an empty file, or with `contents`; its parent must exist.
    public func createFile(_ relativePath: String, contents: String = "") throws {
        try write(relativePath, contents)
    }

    /// Writes `contents` to a file (made if missing, emptied first if not) and closes it.
    public func write(_ relativePath: String, _ contents: String) throws {
        try write(relativePath, contents, flags: O_TRUNC)
    }

    private func write(_ relativePath: String, _ contents: String, flags: Int32) throws {
        let target = path(relativePath)
        let fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0o644)
        guard fd >= 0 else { throw TemporaryDirectoryError(path: target, action: "could not be opened", errno: errno) }
        defer { close(fd) }
        let bytes = Array(contents.utf8)
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if count < 0 {
                if errno == EINTR { continue }
                throw TemporaryDirectoryError(path: target, action: "could not be written", errno: errno)
            }
            done += count
        }
    }

    /// Adds `contents` at the end of a file (made if missing) and closes it: one write, so the
    /// kernel reports one modification.
    public func append(_ relativePath: String, _ contents: String) throws {
        try write(relativePath, contents, flags: O_APPEND)
    }

    /// Makes a directory, and its missing parents.
    public func createDirectory(_ relativePath: String) throws {
        var made = path
        for component in relativePath.split(separator: "/") {
            made += "/" + component
            if mkdir(made, 0o755) != 0 && errno != EEXIST {
                throw TemporaryDirectoryError(path: made, action: "could not be made", errno: errno)
            }
        }
    }

    /// Renames an entry, as `rename(2)` does (a file at `newPath` is replaced).
    public func rename(_ relativePath: String, to newPath: String) throws {
        guard Glibc.rename(path(relativePath), path(newPath)) == 0 else {
            throw TemporaryDirectoryError(
                path: path(relativePath), action: "could not be renamed to \(path(newPath))", errno: errno)
        }
    }

    /// Removes an entry, and what a directory holds.
    public func remove(_ relativePath: String) throws {
        try Self.removeTree(path(relativePath))
    }

    /// Removes the directory and everything in it now; later calls do nothing.
    public func remove() {
        try? Self.removeTree(path)
    }

    /// Whether an entry is at `relativePath`.
    public func exists(_ relativePath: String) -> Bool {
        var status = stat()
        return lstat(path(relativePath), &status) == 0
    }

    static func removeTree(_ target: String) throws {
        var status = stat()
        guard lstat(target, &status) == 0 else {
            if errno == ENOENT { return }
            throw TemporaryDirectoryError(path: target, action: "could not be examined", errno: errno)
        }
        if status.st_mode & S_IFMT == S_IFDIR {
            var directory = opendir(target)
            if directory == nil, errno == EACCES {
                // Permissions a test took away (as root, never needed).
                chmod(target, 0o755)
                directory = opendir(target)
            }
            if let directory {
                var names: [String] = []
                while let entry = readdir(directory) {
                    let name = withUnsafeBytes(of: entry.pointee.d_name) {
                        String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
                    }
                    if name != "." && name != ".." { names.append(name) }
                }
                closedir(directory)
                for name in names { try removeTree(target + "/" + name) }
            }
            guard rmdir(target) == 0 || errno == ENOENT else {
                throw TemporaryDirectoryError(path: target, action: "could not be removed", errno: errno)
            }
        } else {
            guard unlink(target) == 0 || errno == ENOENT else {
                throw TemporaryDirectoryError(path: target, action: "could not be removed", errno: errno)
            }
        }
    }
}

/// A fixture's file operation failed: the path, what was tried, and the system's reason.
public struct TemporaryDirectoryError: Error, CustomStringConvertible, Sendable {
    public let path: String
    public let action: String
    public let errno: Int32

    public var description: String { "\(path) \(action): \(String(cString: strerror(errno)))" }
}
