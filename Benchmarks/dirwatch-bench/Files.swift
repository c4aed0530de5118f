import Glibc

/// The directories and files the benchmark creates, under one scratch directory it removes.
enum Files {
    static func makeDirectory(_ path: String) throws(BenchError) {
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else { throw .system("mkdir", path) }
    }

    /// Creates an empty file: one IN_CREATE for a watcher of its directory (the IN_OPEN and
    /// IN_CLOSE_WRITE that follow are outside the watched mask, so the kernel queues nothing).
    static func createFile(_ path: String) throws(BenchError) {
        let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .system("open", path) }
        close(fd)
    }

    /// Creates `count` files named `prefix0`, `prefix1`, … in `directory`.
    static func createFiles(in directory: String, prefix: String, count: Int) throws(BenchError) {
        for index in 0..<count { try createFile("\(directory)/\(prefix)\(index)") }
    }

    /// A tree of exactly `count` directories below `root` (root not counted), ten children each,
    /// breadth first: 10, 100, 1,000, … directories per level.
    static func makeTree(at root: String, directories count: Int) throws(BenchError) {
        try makeDirectory(root)
        var parents = [root]
        var made = 0
        var next = 0
        while made < count {
            let parent = parents[next]
            next += 1
            for child in 0..<10 where made < count {
                let path = "\(parent)/\(child)"
                try makeDirectory(path)
                parents.append(path)
                made += 1
            }
        }
    }

    /// Removes `path` and everything below it.
    static func remove(_ path: String) {
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        if status.st_mode & S_IFMT == S_IFDIR {
            for name in directoryEntries(path) { remove("\(path)/\(name)") }
            rmdir(path)
        } else {
            unlink(path)
        }
    }
}

extension Files {
    /// Has the kernel drop its cached pages of the executable `command` starts (looked up in PATH
    /// when it names no directory), so that the peer's resident code is read back as it runs, as
    /// after a reboot. A binary just written keeps large page-cache folios, and a process mapping
    /// it counts more of its code resident than it does once the pages have been read back
    /// (Docs/benchmarks.md, "Outgrown blocks given back"); every peer is measured in the same state.
    /// Shared libraries are left alone: every peer maps the same ones.
    static func dropCachedPages(ofCommand command: String) {
        let candidates =
            command.contains("/")
            ? [command]
            : (getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin").split(separator: ":").map {
                "\($0)/\(command)"
            }
        guard let path = candidates.first(where: { access($0, X_OK) == 0 }) else { return }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        _ = fdatasync(fd)  // dirty pages are not dropped
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
    }

    /// Replaces the file at `path` with `text`.
    static func write(_ text: String, to path: String) throws(BenchError) {
        let fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .system("open", path) }
        defer { close(fd) }
        writeAll(text, to: fd)
    }
}
