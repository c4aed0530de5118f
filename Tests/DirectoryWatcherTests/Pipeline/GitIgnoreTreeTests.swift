import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Trees that leave out what git ignores (``DirectoryWatcher/Options/gitignore``), through the
/// kernel: an ignored directory is never watched (the kernel's own list of watches, from
/// `/proc/self/fdinfo`) nor listed (every directory opened, counted through the syscall table),
/// no change about an ignored entry is reported, and an edited `.gitignore` lets in and leaves
/// out at once.
final class GitIgnoreTreeTests: WatchedDirectoryTestCase {
    /// Every directory the loop opened or listed, by its path.
    let opened = LockedValue<Set<String>>([])

    /// The live calls, recording each directory opened (by path, or from a directory) or read.
    func recordingCalls() -> SystemCalls {
        var calls = SystemCalls.live
        let live = SystemCalls.live
        let opened = self.opened
        @Sendable func record(_ path: String) { opened.update { $0.insert(path) } }
        @Sendable func path(of fd: Int32) -> String? {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")
        }
        calls.openDirectory = { name, noFollow in
            let fd = live.openDirectory(name, noFollow)
            if fd >= 0, let path = path(of: fd) { record(path) }
            return fd
        }
        calls.openDirectoryAt = { directory, name, options in
            let fd = live.openDirectoryAt(directory, name, options)
            if fd >= 0, let path = path(of: fd) { record(path) }
            return fd
        }
        calls.getdents64 = { fd, buffer, count in
            if let path = path(of: fd) { record(path) }
            return live.getdents64(fd, buffer, count)
        }
        return calls
    }

    func mkdir(_ names: String...) {
        for name in names {
            XCTAssertEqual(Glibc.mkdir(directory.url(name), 0o755), 0, "mkdir \(name)")
        }
    }

    func write(_ name: String, _ contents: String) {
        XCTAssertTrue(FileManager.default.createFile(atPath: directory.url(name), contents: Data(contents.utf8)))
    }

    /// Watches the tree, leaving out what git ignores, on a loop whose calls are recorded.
    func watchTree() throws -> EventLoop {
        let loop = try EventLoop(system: System(recordingCalls()))
        try watch {
            try DirectoryWatcher.make(
                path: directory.path,
                options: DirectoryWatcher.Options(recursive: true, gitignore: true, backend: .automatic), delegate: $0,
                queue: nil, loop: loop)
        }
        XCTAssertEqual(watcher.backendChoice?.kind, .inotify)
        return loop
    }

    func inode(_ name: String) -> UInt64 {
        var status = stat()
        XCTAssertEqual(stat(directory.url(name), &status), 0, name)
        return UInt64(status.st_ino)
    }

    func paths(_ names: [String]) -> Set<FileSystemPath> {
        Set(names.map { $0.isEmpty ? FileSystemPath(directory.path) : FileSystemPath(directory.url($0)) })
    }

    func testIgnoredDirectoriesAreNeverWatchedOrListedAndTheirChangesNeverReported() throws {
        mkdir(".git", "build", "build/deep", "a", "a/gen", "a/gen/x", "a/src", "out", "sub", "sub/out")
        write(".gitignore", "build/\n*.log\n!keep.log\n/out\n")
        write("a/.gitignore", "gen/\n")
        let loop = try watchTree()
        defer { loop.shutdown() }
        XCTAssertEqual(Set(watcher.watchedDirectories()), paths(["", ".git", "a", "a/src", "sub", "sub/out"]))
        let ignored = ["build", "build/deep", "a/gen", "a/gen/x", "out"]
        let watchedInodes = Set(ProcessResources.watches().map { $0[1] })
        for name in ignored {
            XCTAssertFalse(watchedInodes.contains(inode(name)), "\(name) has a kernel watch")
            XCTAssertFalse(opened.get().contains(directory.url(name)), "\(name) was opened or listed")
        }
        XCTAssertTrue(opened.get().contains(directory.url("a/src")), "the recording sees the walk")
        for name in ["build/f", "build/deep/g", "a/gen/h", "out/i", "a/x.log", "a/keep.log", "a/src/m", "sub/out/n"] {
            directory.touch(name)
        }
        mkdir("a/src/new", "build/new")
        directory.touch("a/src/new/k")
        let changes = delivered()
        XCTAssertEqual(
            Set(changes.filter { $0.kind == .created }.map(\.path)),
            paths(["a/keep.log", "a/src/m", "sub/out/n", "a/src/new", "a/src/new/k"]), "\(changes)")
        XCTAssertEqual(changes.filter { $0.kind != .created && $0.kind != .modified }, [], "\(changes)")
        for name in ignored {
            XCTAssertFalse(opened.get().contains(directory.url(name)), "\(name) was opened or listed")
        }
    }

    /// The `.gitignore` rewritten: what it no longer ignores comes in (a directory watched, what
    /// it holds reported), what it now ignores goes (let go, nothing below it reported after).
    func testAGitignoreEditedWhileWatchingLetsInAndLeavesOut() throws {
        mkdir(".git", "build", "build/x", "src")
        directory.touch("build/x/f")
        directory.touch("src/g")
        write(".gitignore", "build/\n")
        let loop = try watchTree()
        defer { loop.shutdown() }
        XCTAssertEqual(Set(watcher.watchedDirectories()), paths(["", ".git", "src"]))
        write(".gitignore", "src/\n")
        // The walk of what came in may finish after the barrier that follows the write.
        let changes = delivered() + delivered()
        var model = TreeModel(
            root: directory.path, entries: [".git": true, ".gitignore": false, "src": true, "src/g": false])
        XCTAssertEqual(model.apply(changes), [])
        XCTAssertEqual(
            model.entries,
            [".git": true, ".gitignore": false, "build": true, "build/x": true, "build/x/f": false], "\(changes)")
        XCTAssertTrue(
            changes.contains(DirectoryChange(.movedIn, directory.url("build"), directory: true)), "\(changes)")
        XCTAssertTrue(changes.contains(DirectoryChange(.movedOut, directory.url("src"), directory: true)), "\(changes)")
        XCTAssertEqual(Set(watcher.watchedDirectories()), paths(["", ".git", "build", "build/x"]))
        XCTAssertFalse(ProcessResources.isWatched(directory.url("src")))
        directory.touch("build/x/later")
        directory.touch("src/later")
        XCTAssertEqual(
            delivered().filter { $0.kind == .created }, [DirectoryChange(.created, directory.url("build/x/later"))])
        // Removed, the file ignores nothing.
        XCTAssertEqual(unlink(directory.url(".gitignore")), 0)
        let after = delivered() + delivered()
        XCTAssertTrue(after.contains(DirectoryChange(.movedIn, directory.url("src"), directory: true)), "\(after)")
        XCTAssertTrue(after.contains(DirectoryChange(.created, directory.url("src/later"))), "\(after)")
    }

    /// A `.gitignore` edited while the watcher is paused: the resuming batch, then what the new
    /// rules let in (watched, with what it holds) and leave out.
    func testAGitignoreEditedWhilePausedTakesEffectOnResuming() throws {
        mkdir(".git", "build", "src")
        directory.touch("build/out")
        write(".gitignore", "build/\n")
        let loop = try watchTree()
        defer { loop.shutdown() }
        XCTAssertTrue(watcher.pause())
        write(".gitignore", "src/\n")
        directory.touch("src/paused")
        XCTAssertTrue(watcher.resume())
        let changes = delivered() + delivered()
        var model = TreeModel(root: directory.path, entries: [".git": true, ".gitignore": false, "src": true])
        XCTAssertEqual(model.apply(changes), [], "\(changes)")
        XCTAssertEqual(
            model.entries, [".git": true, ".gitignore": false, "build": true, "build/out": false], "\(changes)")
        XCTAssertEqual(Set(watcher.watchedDirectories()), paths(["", ".git", "build"]))
        directory.touch("build/later")
        directory.touch("src/later")
        XCTAssertEqual(
            delivered().filter { $0.kind == .created }, [DirectoryChange(.created, directory.url("build/later"))])
    }

    /// A file renamed between an ignored name and another: the other's arrival or departure.
    func testARenameBetweenAnIgnoredNameAndAnotherIsAMoveInOrOut() throws {
        mkdir(".git")
        write(".gitignore", "*.tmp\n")
        let loop = try watchTree()
        defer { loop.shutdown() }
        directory.touch("save.tmp")
        XCTAssertEqual(delivered(), [])
        XCTAssertEqual(Glibc.rename(directory.url("save.tmp"), directory.url("save.txt")), 0)
        XCTAssertEqual(delivered(), [DirectoryChange(.movedIn, directory.url("save.txt"))])
        XCTAssertEqual(Glibc.rename(directory.url("save.txt"), directory.url("old.tmp")), 0)
        XCTAssertEqual(delivered(), [DirectoryChange(.movedOut, directory.url("save.txt"))])
    }

    /// Not recursive: the directory's own `.gitignore`, read at start and again when it changes.
    func testAWatcherOfOneDirectoryReadsItsGitignore() throws {
        mkdir(".git")
        write(".gitignore", "*.tmp\n")
        directory.touch("old.tmp")
        try watch {
            try DirectoryWatcher.watchFolder(
                path: directory.path, options: DirectoryWatcher.Options(gitignore: true), delegate: $0)
        }
        directory.touch("new.tmp")
        directory.touch("new.txt")
        XCTAssertEqual(
            delivered().filter { $0.kind == .created }, [DirectoryChange(.created, directory.url("new.txt"))])
        write(".gitignore", "*.txt\n")
        let changes = delivered()
        for name in ["old.tmp", "new.tmp"] {
            XCTAssertTrue(changes.contains(DirectoryChange(.movedIn, directory.url(name))), "\(changes)")
        }
        XCTAssertTrue(changes.contains(DirectoryChange(.movedOut, directory.url("new.txt"))), "\(changes)")
        directory.touch("later.txt")
        directory.touch("later.tmp")
        XCTAssertEqual(
            delivered().filter { $0.kind == .created }, [DirectoryChange(.created, directory.url("later.tmp"))])
    }

    /// Watched below the top of its work tree: the `.gitignore` files above it and
    /// `.git/info/exclude` apply too.
    func testTheFilesAboveTheWatchedDirectoryApply() throws {
        mkdir(".git", ".git/info", "project", "project/logs", "project/src")
        write(".gitignore", "logs/\n")
        write(".git/info/exclude", "*.bak\n")
        let loop = try EventLoop(system: System(recordingCalls()))
        defer { loop.shutdown() }
        try watch {
            try DirectoryWatcher.make(
                path: directory.url("project"), options: DirectoryWatcher.Options(recursive: true, gitignore: true),
                delegate: $0, queue: nil, loop: loop)
        }
        XCTAssertEqual(Set(watcher.watchedDirectories()), paths(["project", "project/src"]))
        for name in ["project/logs/a", "project/src/b.bak", "project/src/c"] { directory.touch(name) }
        XCTAssertEqual(
            delivered().filter { $0.kind == .created }, [DirectoryChange(.created, directory.url("project/src/c"))])
    }

    /// What does not leave out what git ignores yet says so, naming the directory, rather than
    /// watching everything.
    func testPollingOrFanotifyWithGitignoreIsAClearError() throws {
        for backend in [DirectoryWatcher.Backend.polling, .fanotify] {
            let options = DirectoryWatcher.Options(recursive: true, gitignore: true, backend: backend)
            XCTAssertThrowsError(try DirectoryWatcher.watchFolder(path: directory.path, options: options) { _ in }) {
                let error = $0 as? DirectoryWatcherError
                XCTAssertEqual(error?.code, .invalidOption, "\(backend)")
                XCTAssertEqual(error?.path, FileSystemPath(directory.path))
                XCTAssertTrue(error?.description.contains("git ignores") ?? false, "\(String(describing: error))")
            }
        }
    }

    /// The test: a generated tree with nested `.gitignore` files, in a repository; a file
    /// made in every directory, ignored or not, and a directory with a file in it in each: what
    /// is reported is exactly what `git check-ignore` does not ignore, and no ignored directory
    /// is watched or listed.
    func testAGeneratedTreeReportsExactlyWhatGitDoesNotIgnore() throws {
        guard let git = ["/usr/bin/git", "/bin/git"].first(where: FileManager.default.isExecutableFile) else {
            throw XCTSkip("git is not installed")
        }
        let rounds = StressSuite.isEnabled ? 8 : 1
        for round in 0..<rounds {
            try generatedTreeRound(git: git, seed: 0x6177_1700 &+ UInt64(round))
        }
    }

    private func generatedTreeRound(git: String, seed: UInt64) throws {
        directory = TemporaryDirectory()
        opened.set([])
        try runProgram(git, ["init", "-q", directory.path])
        let names = ["a", "b", "build", "logs", "x", "z", "d1", "d2", "keep.log", "x.log", "top", "m.txt"]
        let patterns = [
            "*.log", "!keep.log", "build/", "/top", "a/b", "**/logs", "x/**", "a/**/z", "d*/", "!d1/", "m.txt", "b",
            "!b/", "/a/", "z",
        ]
        var random = SplitMix64(seed: seed)
        var directories = [""]
        var next = 0
        while next < directories.count {
            let parent = directories[next]
            next += 1
            guard parent.split(separator: "/").count < 3 else { continue }
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let name = names[Int.random(in: 0..<names.count, using: &random)]
                let path = parent.isEmpty ? name : parent + "/" + name
                if FileManager.default.fileExists(atPath: directory.url(path)) { continue }
                if Bool.random(using: &random) {
                    mkdir(path)
                    directories.append(path)
                } else {
                    directory.touch(path)
                }
            }
        }
        for directoryPath in directories where Int.random(in: 0..<2, using: &random) == 0 {
            let lines = (0..<Int.random(in: 1...3, using: &random)).map { _ in
                patterns[Int.random(in: 0..<patterns.count, using: &random)]
            }
            write(
                directoryPath.isEmpty ? ".gitignore" : directoryPath + "/.gitignore",
                lines.joined(separator: "\n") + "\n")
        }
        let ignoredByGit = try gitIgnored(git, directories.filter { !$0.isEmpty })
        let loop = try watchTree()
        defer {
            watcher.invalidate()
            loop.shutdown()
        }
        let context = "seed \(seed): \(directories)"
        let watchedInodes = Set(ProcessResources.watches().map { $0[1] })
        for path in directories where !path.isEmpty {
            let ignored = ignoredByGit.contains(path)
            XCTAssertEqual(watchedInodes.contains(inode(path)), !ignored, "\(path) (\(context))")
            if ignored { XCTAssertFalse(opened.get().contains(directory.url(path)), "\(path) listed (\(context))") }
        }
        // A file and a directory with a file in it, made in every directory of the tree.
        var made: [String] = []
        for parent in directories {
            let prefix = parent.isEmpty ? "" : parent + "/"
            for name in ["new.log", "new.txt", "top"]
            where !FileManager.default.fileExists(atPath: directory.url(prefix + name)) {
                directory.touch(prefix + name)
                made.append(prefix + name)
            }
            for name in ["logs", "fresh"] where !FileManager.default.fileExists(atPath: directory.url(prefix + name)) {
                mkdir(prefix + name)
                directory.touch(prefix + name + "/inside.txt")
                made += [prefix + name, prefix + name + "/inside.txt"]
            }
        }
        let reportable = try gitIgnored(git, made)
        let expected = Set(made.filter { !reportable.contains($0) })
        let reported = Set(delivered().filter { $0.kind == .created }.map(\.path))
        XCTAssertEqual(reported, paths(Array(expected)), "\(context)")
        if reported != paths(Array(expected)) {
            print("reported, not expected:", reported.subtracting(paths(Array(expected))).map(\.description).sorted())
            print("expected, not reported:", paths(Array(expected)).subtracting(reported).map(\.description).sorted())
        }
    }

    /// The paths, relative to the tree, that `git check-ignore` says git ignores.
    private func gitIgnored(_ git: String, _ paths: [String]) throws -> Set<String> {
        guard !paths.isEmpty else { return [] }
        let output = try runProgram(
            git, ["-C", directory.path, "check-ignore", "--no-index", "--"] + paths, allowing: [0, 1], isolated: false)
        return Set(output.split(separator: "\n").map(String.init))
    }
}
