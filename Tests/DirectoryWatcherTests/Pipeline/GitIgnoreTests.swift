import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// git's ignore rules as ``GitIgnores`` reads them, against `git check-ignore` itself: on
/// hand-written cases (negation, directory-only patterns, anchored patterns, `**`, escapes,
/// nested files, `.git/info/exclude` and the global excludes file) and on generated trees with
/// nested `.gitignore` files. Skipped where git is not installed (`.ci/run` installs it).
final class GitIgnoreTests: XCTestCase {
    /// One tree on disk: its files' contents by relative path ("/" ending a directory).
    struct Case {
        var ignoreFiles: [String: String]
        var entries: [String]
        var infoExclude = ""
        var globalExcludes = ""
    }

    func testHandWrittenCasesAgreeWithGit() throws {
        let cases: [Case] = [
            // Names at any depth, negation, a later pattern winning.
            Case(
                ignoreFiles: [".gitignore": "*.log\n!keep.log\nbuild/\n"],
                entries: [
                    "a.log", "keep.log", "sub/", "sub/b.log", "sub/keep.log", "build/", "build/x", "sub/build/",
                    "sub/build/y", "build.txt",
                ]),
            // A directory ignored: nothing below it can be included again.
            Case(
                ignoreFiles: [".gitignore": "out/\n!out/keep\n", "out/.gitignore": "!keep\n"],
                entries: ["out/", "out/keep", "out/other"]),
            // Anchored patterns, with a slash at the start or in the middle.
            Case(
                ignoreFiles: [".gitignore": "/top\ndoc/*.txt\n", "sub/.gitignore": "/here\nnested/x\n"],
                entries: [
                    "top", "sub/", "sub/top", "doc/", "doc/a.txt", "doc/deeper/", "doc/deeper/b.txt",
                    "sub/here", "sub/sub2/", "sub/sub2/here", "sub/nested/", "sub/nested/x", "here",
                ]),
            // `**` leading, trailing and between slashes; `**` elsewhere is `*`.
            Case(
                ignoreFiles: [".gitignore": "**/logs\na/**/z\nkeep/**\nx**y\n"],
                entries: [
                    "logs/", "logs/f", "deep/logs/", "deep/er/logs", "a/", "a/z", "a/b/", "a/b/z", "a/b/c/",
                    "a/b/c/z", "keep/", "keep/f", "keep/d/", "keep/d/g", "xay", "x/", "x/y",
                ]),
            // Directory-only patterns match no file; `?`, brackets, classes, ranges.
            Case(
                ignoreFiles: [".gitignore": "cache/\n?.tmp\n*.[oa]\n[!m]*.c\n[[:digit:]]*\n[a-c]x\n"],
                entries: [
                    "cache", "sub/", "sub/cache/", "a.tmp", "ab.tmp", "f.o", "g.a", "h.b", "main.c", "util.c",
                    "9lives", "bx", "dx",
                ]),
            // Comments, escapes, trailing spaces (dropped unless escaped), CRLF line ends.
            Case(
                ignoreFiles: [".gitignore": "# a comment\n\\#hash\n\\!bang\nspaced   \nkept\\ \r\ncrlf\r\n\n"],
                entries: ["# a comment", "#hash", "!bang", "spaced", "kept ", "kept", "crlf"]),
            // A deeper file overrides a shallower one; info/exclude and the global file come last.
            Case(
                ignoreFiles: [".gitignore": "*.gen\n", "lib/.gitignore": "!*.gen\n"],
                entries: ["a.gen", "lib/", "lib/b.gen", "lib/sub/", "lib/sub/c.gen", "excluded", "global", "both"],
                infoExclude: "excluded\nboth\n", globalExcludes: "global\n!both\n"),
        ]
        for (index, testCase) in cases.enumerated() {
            try compareWithGit(testCase, "case \(index)")
        }
    }

    /// The files read at start: the top of the work tree found above the watched directory, the
    /// `.gitignore` files between, `info/exclude` (through a worktree's `.git` file too), and the
    /// global excludes file as git finds it: `core.excludesFile` of the user's configuration (`~`
    /// expanded, the last one winning), else `$XDG_CONFIG_HOME/git/ignore`.
    func testTheRulesReadAtStartAreGitsOwn() throws {
        let directory = TemporaryDirectory()
        let home = directory.url("home")
        for made in [
            "home", "home/config", "home/config/git", "repo", "repo/.git", "repo/.git/info", "repo/a", "repo/a/b",
        ] {
            XCTAssertEqual(mkdir(directory.url(made), 0o755), 0)
        }
        func write(_ name: String, _ text: String) {
            XCTAssertTrue(FileManager.default.createFile(atPath: directory.url(name), contents: Data(text.utf8)))
        }
        write("repo/.gitignore", "*.top\n")
        write("repo/a/.gitignore", "*.middle\n")
        write("repo/.git/info/exclude", "*.exclude\n")
        write(
            "home/.gitconfig",
            "[user]\n\tname = x\n[core]\n\texcludesFile = ~/first\n[core]\n\tExcludesFile = \"~/global\" ; why\n")
        write("home/global", "*.global\n")
        write("home/config/git/ignore", "*.default\n")
        let environment: [String: String] = [
            "HOME": home, "XDG_CONFIG_HOME": home + "/config", "GIT_CONFIG_NOSYSTEM": "1",
        ]
        let root = FileSystemPath(directory.url("repo/a/b"))
        let state = GitIgnoreState.load(root: root, recursive: true, system: System(.live)) { environment[$0] }
        XCTAssertEqual(state.top, FileSystemPath(directory.url("repo")))
        let rules = state.rules(epoch: 0) { _ -> FileSystemPath? in nil }
        for (name, ignored) in [
            ("x.top", true), ("x.middle", true), ("x.exclude", true), ("x.global", true), ("x.default", false),
            ("x.other", false),
        ] {
            XCTAssertEqual(rules.isIgnored(Array("a/b/\(name)".utf8)[...], isDirectory: false), ignored, name)
        }
        // No core.excludesFile: the default file.
        write("home/.gitconfig", "[user]\n\tname = x\n")
        let defaults = GitIgnoreState.load(root: root, recursive: true, system: System(.live)) { environment[$0] }
            .rules(epoch: 0) { _ -> FileSystemPath? in nil }
        XCTAssertTrue(defaults.isIgnored(Array("a/b/x.default".utf8)[...], isDirectory: false))
        XCTAssertFalse(defaults.isIgnored(Array("a/b/x.global".utf8)[...], isDirectory: false))
        // A worktree's `.git` file names its git directory, relative to the file's.
        XCTAssertEqual(mkdir(directory.url("worktree"), 0o755), 0)
        XCTAssertEqual(mkdir(directory.url("worktree/sub"), 0o755), 0)
        write("worktree/.git", "gitdir: ../repo/.git\n")
        let worktree = GitIgnoreState.load(
            root: FileSystemPath(directory.url("worktree/sub")), recursive: true, system: System(.live)
        ) { environment[$0] }
        XCTAssertEqual(worktree.top, FileSystemPath(directory.url("worktree")))
        XCTAssertTrue(
            worktree.rules(epoch: 0) { _ -> FileSystemPath? in nil }.isIgnored(
                Array("sub/x.exclude".utf8)[...], isDirectory: false))
    }

    /// Generated trees: directories three deep with names the patterns are made of, a
    /// `.gitignore` in some of them drawn from patterns of every kind.
    func testGeneratedTreesAgreeWithGit() throws {
        let names = [
            "a", "b", "build", "logs", "x", "z", "d1", "d2", "keep.log", "x.log", "top", "m.txt", "f.o", "q.tmp",
        ]
        let patterns = [
            "*.log", "!keep.log", "build/", "/top", "a/b", "**/logs", "x/**", "a/**/z", "*.[oa]", "?.tmp", "d*/",
            "!d1/", "!*.txt", "m.txt", "b", "!b/", "logs/*.log", "/a/", "z", "!x.log",
        ]
        var random = SplitMix64(seed: 0x6177_1600)
        for round in 0..<(StressSuite.isEnabled ? 60 : 10) {
            var entries: Set<String> = []
            var directories: [String] = [""]
            var next = 0
            while next < directories.count {
                let parent = directories[next]
                next += 1
                let depth = parent.split(separator: "/").count
                for _ in 0..<Int.random(in: 2...5, using: &random) {
                    let name = names[Int.random(in: 0..<names.count, using: &random)]
                    let path = parent.isEmpty ? name : parent + "/" + name
                    if entries.contains(path) || entries.contains(path + "/") { continue }
                    if depth < 3 && Bool.random(using: &random) {
                        entries.insert(path + "/")
                        directories.append(path)
                    } else {
                        entries.insert(path)
                    }
                }
            }
            var ignoreFiles: [String: String] = [:]
            for directory in directories where Int.random(in: 0..<3, using: &random) == 0 {
                let lines = (0..<Int.random(in: 1...4, using: &random)).map { _ in
                    patterns[Int.random(in: 0..<patterns.count, using: &random)]
                }
                ignoreFiles[directory.isEmpty ? ".gitignore" : directory + "/.gitignore"] =
                    lines.joined(separator: "\n") + "\n"
            }
            try compareWithGit(
                Case(ignoreFiles: ignoreFiles, entries: entries.sorted()), "round \(round): \(ignoreFiles)")
        }
    }

    /// Makes the case's tree in a new repository and compares, path by path, what git ignores
    /// with what ``GitIgnores`` says.
    func compareWithGit(_ testCase: Case, _ context: String) throws {
        guard let git = ["/usr/bin/git", "/bin/git"].first(where: FileManager.default.isExecutableFile) else {
            throw XCTSkip("git is not installed")
        }
        let directory = TemporaryDirectory()
        let root = directory.path
        try runProgram(git, ["init", "-q", root])
        var rules = GitIgnores()
        for entry in testCase.entries {
            let path = root + "/" + entry
            if entry.hasSuffix("/") {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } else {
                try FileManager.default.createDirectory(
                    atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                _ = FileManager.default.createFile(atPath: path, contents: Data())
            }
        }
        for (file, contents) in testCase.ignoreFiles {
            let path = root + "/" + file
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
            let directoryPath = (file as NSString).deletingLastPathComponent
            rules.directories[Array(directoryPath.utf8)] = GitIgnoreList(parsing: Array(contents.utf8))
        }
        try Data(testCase.infoExclude.utf8).write(to: URL(fileURLWithPath: root + "/.git/info/exclude"))
        let global = directory.url("global-excludes")
        try Data(testCase.globalExcludes.utf8).write(to: URL(fileURLWithPath: global))
        rules.everywhere = [
            GitIgnoreList(parsing: Array(testCase.infoExclude.utf8)),
            GitIgnoreList(parsing: Array(testCase.globalExcludes.utf8)),
        ]
        let paths = testCase.entries.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        let output = try runProgram(
            git, ["-C", root, "-c", "core.excludesFile=\(global)", "check-ignore", "--no-index", "--"] + paths,
            allowing: [0, 1])
        let ignoredByGit = Set(output.split(separator: "\n").map(String.init))
        for entry in testCase.entries {
            let isDirectory = entry.hasSuffix("/")
            let path = isDirectory ? String(entry.dropLast()) : entry
            XCTAssertEqual(
                rules.isIgnored(Array(path.utf8)[...], isDirectory: isDirectory), ignoredByGit.contains(path),
                "\(context): \(entry) (git \(ignoredByGit.contains(path) ? "ignores" : "does not ignore") it)")
        }
    }
}

/// Runs `program` to its end; its standard output. Fails unless its status is allowed.
/// `isolated`: git reads no configuration of the system's or the user's (a watcher does, so a
/// comparison with one reads the same).
@discardableResult
func runProgram(
    _ program: String, _ arguments: [String], allowing statuses: Set<Int32> = [0], isolated: Bool = true
) throws -> String {
    let output = TemporaryDirectory()
    let file = output.url("out")
    _ = FileManager.default.createFile(atPath: file, contents: nil)
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
    defer { try? handle.close() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    var environment = ProcessInfo.processInfo.environment
    if isolated {
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["HOME"] = output.path
        environment["XDG_CONFIG_HOME"] = nil
    }
    process.environment = environment
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = handle
    try process.run()
    process.waitUntilExit()
    XCTAssertTrue(statuses.contains(process.terminationStatus), "\(program) \(arguments): \(process.terminationStatus)")
    return try String(contentsOfFile: file, encoding: .utf8)
}
