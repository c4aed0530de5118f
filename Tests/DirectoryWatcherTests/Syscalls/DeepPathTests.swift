import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Directories whose absolute path is longer than PATH_MAX (4,096 bytes), which no system call
/// takes whole: opened in steps, watched through `/proc/self/fd`, and found by walking up when
/// `getcwd` gives up. Every change still carries its exact path.
final class DeepPathTests: WatchedDirectoryTestCase {
    private var deep: DeepDirectory!

    override func setUpWithError() throws {
        try super.setUpWithError()
        deep = DeepDirectory(under: directory.path)
        XCTAssertGreaterThan(deep.path.utf8.count, Int(PATH_MAX), "deeper than one system call reaches")
    }

    override func tearDown() {
        watcher?.invalidate()
        deep.remove()
        deep = nil
        super.tearDown()
    }

    // MARK: Watching

    func testADirectoryDeeperThanPathMaxIsWatched() throws {
        try watch { try DirectoryWatcher.watchFolder(path: deep.path, delegate: $0) }
        XCTAssertEqual(watcher.path, FileSystemPath(deep.path))
        XCTAssertEqual(ProcessResources.watchedInodes().filter { $0 == deep.inode }.count, 1, "its own kernel watch")
        let file = deep.touch("made")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, file)])
    }

    /// What a pause's resume reports comes from listing the directory by its path and comparing
    /// that with its first listing: both are read through descriptors opened in steps.
    func testADeepDirectoryIsListed() throws {
        deep.touch("old")
        try watch { try DirectoryWatcher.watchFolder(path: deep.path, delegate: $0) }
        XCTAssertTrue(watcher.pause())
        XCTAssertEqual(renameat(deep.fd, "old", deep.fd, "new"), 0)
        XCTAssertTrue(watcher.resume())
        var renamed = DirectoryChange(.renamed, deep.url("new"), from: deep.url("old"))
        renamed.whilePaused = true
        XCTAssertEqual(delivered(), [renamed], "a rename is found only against the first listing")
    }

    func testATreeBelowPathMaxIsWatched() throws {
        try treeBelowPathMaxIsWatched(backend: .inotify)
    }

    func testATreeBelowPathMaxIsWatchedThroughFanotify() throws {
        try treeBelowPathMaxIsWatched(backend: .fanotify)
    }

    private func treeBelowPathMaxIsWatched(backend: DirectoryWatcher.Backend) throws {
        try watch {
            try DirectoryWatcher.watchFolder(
                path: deep.path, options: .init(recursive: true, backend: backend), delegate: $0)
        }
        XCTAssertEqual(watcher.backendChoice?.kind, backend == .inotify ? .inotify : .fanotify)
        XCTAssertEqual(mkdirat(deep.fd, "sub", 0o755), 0)
        let inner = deep.touch("sub/inner")
        XCTAssertEqual(
            delivered(),
            [DirectoryChange(.created, deep.url("sub"), directory: true), DirectoryChange(.created, inner)])
        let later = deep.touch("sub/later")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, later)], "the subdirectory is watched")
    }

    /// A file watch resolves a symbolic link at the end of its path: `readlink` of a long path,
    /// through its directory.
    func testAFileInADeepDirectoryIsWatchedThroughItsLink() throws {
        XCTAssertEqual(symlinkat("config.real", deep.fd, "config"), 0)
        try watch { try DirectoryWatcher.watchFile(path: deep.url("config"), delegate: $0) }
        deep.touch("unrelated")
        deep.touch("config.real")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, deep.url("config"))], "the path as given")
    }

    // MARK: A deep current directory

    /// Runs `body` with the current directory at the deep one (`chdir` would need its long path).
    private func inDeepDirectory(_ body: () throws -> Void) rethrows {
        let saved = open(".", O_RDONLY | O_DIRECTORY)
        XCTAssertGreaterThanOrEqual(saved, 0)
        XCTAssertEqual(fchdir(deep.fd), 0)
        defer {
            XCTAssertEqual(fchdir(saved), 0)
            close(saved)
        }
        try body()
    }

    func testDotInADeepCurrentDirectory() throws {
        try inDeepDirectory {
            try watch { try DirectoryWatcher.watchFolder(path: ".", delegate: $0) }
        }
        XCTAssertEqual(watcher.path, FileSystemPath(deep.path))
        let file = deep.touch("here")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, file)])
    }

    /// Where `getcwd` gives up past PATH_MAX (the system call does; glibc then walks up, musl
    /// does not), the library walks up to `/` itself: the path is absolute and exact still.
    func testARelativePathWhenGetcwdGivesUp() throws {
        let loop = try EventLoop(system: System(.live.failing(\.getcwd, errno: ENAMETOOLONG)))
        defer { loop.shutdown() }
        XCTAssertEqual(mkdirat(deep.fd, "sub", 0o755), 0)
        let recorder = Recorder()
        var made: [DirectoryWatcher] = []
        try inDeepDirectory {
            made.append(try DirectoryWatcher.make(path: ".", delegate: recorder, queue: nil, loop: loop))
            made.append(try DirectoryWatcher.make(path: "sub", delegate: recorder, queue: nil, loop: loop))
        }
        defer { for watcher in made { watcher.invalidate() } }
        XCTAssertEqual(made.map(\.path), [FileSystemPath(deep.path), FileSystemPath(deep.url("sub"))])
        let file = deep.touch("sub/found")
        for watcher in made { waitForDelivery(watcher) }
        XCTAssertEqual(recorder.changes, [DirectoryChange(.created, file)])
    }

    func testTheCurrentDirectoryFoundByWalkingUp() throws {
        let system = System(.live.failing(\.getcwd, errno: ENAMETOOLONG))
        let descriptors = ProcessResources.openDescriptors()
        try inDeepDirectory {
            XCTAssertEqual(try system.currentDirectory(), FileSystemPath(deep.path))
        }
        XCTAssertEqual(ProcessResources.openDescriptors(), descriptors, "every directory opened on the way is closed")
        XCTAssertEqual(try system.currentDirectory(), try System().currentDirectory(), "and from a short one")
    }

    // MARK: Opening in steps

    /// Links and `..` along a long path resolve as the kernel resolves them in one lookup: `..`
    /// after a link is the parent of the link's target.
    func testStepsResolveLinksAndDotDotAsOneLookup() throws {
        let target = directory.mkdir("target")
        XCTAssertEqual(symlinkat(target, deep.fd, "link"), 0)
        let fd = try System().openDirectory(FileSystemPath(deep.url("link/..")))
        defer { close(fd) }
        XCTAssertEqual(inode(of: fd), inode(of: directory.path))
    }

    func testRepeatedSlashesAtAStepAreNotTheRoot() throws {
        let doubled = "/" + deep.path.split(separator: "/").joined(separator: "//") + "//"
        let fd = try System().openDirectory(FileSystemPath(doubled))
        defer { close(fd) }
        XCTAssertEqual(inode(of: fd), deep.inode)
    }

    func testALongPathNotFollowingLinksRefusesALinkAtItsEndAsAShortOne() throws {
        symlink(directory.path, directory.url("link"))
        XCTAssertEqual(symlinkat(directory.path, deep.fd, "link"), 0)
        func refusal(_ path: String) -> Int32? {
            do {
                close(try System().openDirectory(FileSystemPath(path), followingLinks: false))
                return nil
            } catch {
                return error.errno
            }
        }
        let short = refusal(directory.url("link"))
        XCTAssertNotNil(short)
        XCTAssertEqual(refusal(deep.url("link")), short)
    }

    func testANameLongerThanAPathIsTooLong() {
        let path = FileSystemPath(directory.path + "/" + String(repeating: "x", count: Int(PATH_MAX)))
        XCTAssertThrowsError(try System().openDirectory(path)) {
            XCTAssertEqual($0 as? SyscallError, SyscallError(function: "open", errno: ENAMETOOLONG))
        }
    }

    func testMissingAndFileComponentsFailAsInOneLookup() throws {
        deep.touch("file")
        XCTAssertThrowsError(try System().openDirectory(FileSystemPath(deep.url("missing/more")))) {
            XCTAssertEqual(($0 as? SyscallError)?.errno, ENOENT)
        }
        XCTAssertThrowsError(try System().openDirectory(FileSystemPath(deep.url("file")))) {
            XCTAssertEqual(($0 as? SyscallError)?.errno, ENOTDIR)
        }
        let error = watchError(deep.url("missing"))
        XCTAssertEqual(error?.code, .noSuchPath)
        XCTAssertEqual(error?.path, FileSystemPath(deep.url("missing")))
    }

    func testOpeningInStepsLeavesNoDescriptorOpen() throws {
        let descriptors = ProcessResources.openDescriptors()
        for _ in 0..<3 {
            close(try System().openDirectory(FileSystemPath(deep.path)))
            close(try System().openDirectoryReference(FileSystemPath(deep.path), followingLinks: true))
            _ = try? System().openDirectory(FileSystemPath(deep.url("missing")))
        }
        XCTAssertEqual(ProcessResources.openDescriptors(), descriptors)
    }

    private func watchError(_ path: String) -> DirectoryWatcherError? {
        do {
            try DirectoryWatcher.watchFolder(path: path, delegate: Recorder()).invalidate()
            XCTFail("watching \(path) should fail")
            return nil
        } catch {
            return error
        }
    }

    private func inode(of fd: Int32) -> UInt64 {
        var status = stat()
        XCTAssertEqual(fstat(fd, &status), 0)
        return UInt64(status.st_ino)
    }

    private func inode(of path: String) -> UInt64 {
        var status = stat()
        XCTAssertEqual(stat(path, &status), 0)
        return UInt64(status.st_ino)
    }
}

/// A chain of directories below `parent`, 20 deep with names of 250 bytes: its absolute path is
/// over 5,000 bytes. Made, used and removed through descriptors, as no path call can reach it.
final class DeepDirectory {
    /// The absolute path of the deepest directory.
    let path: String
    /// The deepest directory, open.
    let fd: Int32
    let inode: UInt64
    private let parent: String

    init(under parent: String, levels: Int = 20) {
        // The physical path, as getcwd gives it.
        let parent =
            realpath(parent, nil).map { real in
                defer { free(real) }
                return String(cString: real)
            } ?? parent
        self.parent = parent
        var fd = open(parent, O_RDONLY | O_DIRECTORY)
        var names: [String] = []
        for level in 0..<levels {
            let name = Self.name(level)
            precondition(mkdirat(fd, name, 0o755) == 0, "mkdirat: \(String(cString: strerror(errno)))")
            let next = openat(fd, name, O_RDONLY | O_DIRECTORY)
            precondition(next >= 0)
            close(fd)
            fd = next
            names.append(name)
        }
        self.fd = fd
        path = ([parent] + names).joined(separator: "/")
        var status = stat()
        precondition(fstat(fd, &status) == 0)
        inode = UInt64(status.st_ino)
    }

    private static func name(_ level: Int) -> String {
        let prefix = "level-\(level)-"
        return prefix + String(repeating: "d", count: 250 - prefix.count)
    }

    func url(_ name: String) -> String { path + "/" + name }

    /// Creates an empty file (relative to the deepest directory) and returns its path.
    @discardableResult
    func touch(_ name: String) -> String {
        let file = openat(fd, name, O_CREAT | O_WRONLY, 0o644)
        precondition(file >= 0, "openat \(name): \(String(cString: strerror(errno)))")
        close(file)
        return url(name)
    }

    /// Removes the chain and everything in it.
    func remove() {
        close(fd)
        let top = open(parent, O_RDONLY | O_DIRECTORY)
        defer { close(top) }
        Self.removeTree(Self.name(0), in: top)
    }

    private static func removeTree(_ name: String, in directory: Int32) {
        let fd = openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        guard fd >= 0, let stream = fdopendir(fd) else { return }
        var entries: [(name: String, isDirectory: Bool)] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { entries.append((name, entry.pointee.d_type == UInt8(DT_DIR))) }
        }
        for entry in entries {
            if entry.isDirectory { removeTree(entry.name, in: fd) } else { unlinkat(fd, entry.name, 0) }
        }
        closedir(stream)
        unlinkat(directory, name, AT_REMOVEDIR)
    }
}
