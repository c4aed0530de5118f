import CDirectoryWatcherShims
import Foundation
import Testing

@testable import DirWatchCLI

/// A program run to its end.
struct ChildResult {
    var status: Int32
    var output: String
    var errors: String
}

/// Runs `program` with `arguments` to its end, its standard input empty, and returns its status
/// and what it wrote. Its output goes to files, not pipes, so that nothing it writes can fill a
/// pipe while it is waited for.
func runChild(
    _ program: String, _ arguments: [String], environment: [String: String] = [:], directory: URL? = nil
) throws -> ChildResult {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("dirwatch-child-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: scratch) }
    let outputURL = scratch.appendingPathComponent("stdout")
    let errorsURL = scratch.appendingPathComponent("stderr")
    try Data().write(to: outputURL)
    try Data().write(to: errorsURL)
    let output = try FileHandle(forWritingTo: outputURL)
    let errors = try FileHandle(forWritingTo: errorsURL)
    defer {
        try? output.close()
        try? errors.close()
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = output
    process.standardError = errors
    if let directory { process.currentDirectoryURL = directory }
    try process.run()
    process.waitUntilExit()
    return ChildResult(
        status: process.terminationStatus,
        output: try String(contentsOf: outputURL, encoding: .utf8),
        errors: try String(contentsOf: errorsURL, encoding: .utf8))
}

/// Where the program `name` is installed, on the `PATH` or in /usr/bin or /bin; nil if it is not.
func installedProgram(_ name: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    let directories = path.split(separator: ":").map(String.init) + ["/usr/bin", "/bin"]
    return directories.map { $0 + "/" + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// A fresh directory, removed after `body`.
func withTemporaryDirectory<T>(_ body: (URL) throws -> T) throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dirwatch-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}

/// The shell completions ``ShellCompletion`` writes, read back and run in each shell that is
/// installed: every option of the table is offered, values get the table's words or files, and
/// nothing of dirwatch's comes after `--exec` or `--`.
@Suite struct CompletionTests {
    static let tableNames = OptionDescriptor.table.flatMap(\.names)

    /// The words of a man page as it reads: minus signs as typed, without font changes.
    static func words(ofManPage page: String) -> Set<String> {
        let text = page.replacing(#"\-"#, with: "-").replacing(#"\%"#, with: "").replacing(#"\fB"#, with: " ")
            .replacing(#"\fI"#, with: " ").replacing(#"\fR"#, with: " ")
        return Set(text.split { !($0.isLetter || $0.isNumber || $0 == "-") }.map(String.init))
    }

    /// The option names the bash script offers for a word starting with `-`.
    static func bashNames(_ script: String) -> [String] {
        guard let line = script.split(separator: "\n").first(where: { $0.contains("local names=\"") }) else {
            return []
        }
        return line.split(separator: "\"")[1].split(separator: " ").map(String.init)
    }

    /// The option names of the zsh script's `_arguments` specs (`'*--file=[...]...'`).
    static func zshNames(_ script: String) -> [String] {
        script.matches(of: #/'\*(-[^=\[]*)=?-?\[/#).map { String($0.output.1) }
    }

    /// The option names of the fish script's `complete` lines (`-s f -l file`).
    static func fishNames(_ script: String) -> [String] {
        script.split(separator: "\n").filter { $0.hasPrefix("complete -c dirwatch") }.flatMap { line in
            line.matches(of: #/ -([sl]) ([^ ']+)/#).map { ($0.output.1 == "s" ? "-" : "--") + $0.output.2 }
        }
    }

    /// Every spelling of every option, in the man page, in `--help` and in each shell's script: an
    /// option added to the table and left out of the manual (and so of the page) fails here.
    @Test func testEveryOptionIsInTheManPageHelpAndEveryScript() throws {
        let page = Self.words(ofManPage: try ManualPageTests.committedPage())
        let help = Set(
            OptionDescriptor.helpText(width: helpWidth).split { $0 == " " || $0 == "," || $0 == "\n" }.map(String.init))
        for name in Self.tableNames {
            #expect(
                page.contains(name), "the man page lists \(name): add it to the manual, then swift run dirwatch-docs")
            #expect(help.contains(name), "--help lists \(name)")
        }
        #expect(Self.bashNames(ShellCompletion.bash.script()) == Self.tableNames, "bash offers every name")
        #expect(Self.zshNames(ShellCompletion.zsh.script()) == Self.tableNames, "zsh offers every name")
        #expect(Self.fishNames(ShellCompletion.fish.script()) == Self.tableNames, "fish offers every name")
    }

    /// The words a value is completed with are those the parser takes, and those the help lists.
    @Test func testChoicesAreWhatTheParserTakesAndTheHelpLists() throws {
        let event = try #require(OptionDescriptor.named("--event"))
        #expect(Set(event.choices.map { $0.lowercased() }) == Set(eventKinds.keys), "every kind --event takes")
        #expect(try #require(OptionDescriptor.named("--backend")).choices == ["automatic", "inotify", "fanotify"])
        #expect(try #require(OptionDescriptor.named("--completions")).choices == ["bash", "zsh", "fish"])
        for option in OptionDescriptor.table where !option.choices.isEmpty {
            let name = option.names.last!
            for choice in option.choices {
                #expect(option.help.contains(choice), "the help of \(name) lists \(choice)")
                #expect(choice.wholeMatch(of: #/[A-Za-z0-9_]+/#) != nil, "a word each shell takes unquoted: \(choice)")
                _ = try parseArguments([name, choice, "."])
            }
            #expect(throws: UsageError.self) { try parseArguments([name, "nonsense", "."]) }
        }
    }

    @Test func testTheCompletionsOptionNamesAShell() throws {
        #expect(try parseArguments(["--completions", "zsh"]) == .completions(.zsh))
        #expect(try parseArguments(["--completions=fish"]) == .completions(.fish))
        #expect(try parseArguments([".", "--completions", "bash"]) == .completions(.bash), "as --help, whatever else")
        #expect(throws: UsageError("--completions takes bash, zsh or fish, not 'tcsh'")) {
            try parseArguments(["--completions", "tcsh"])
        }
        #expect(throws: UsageError("--completions needs a value")) { try parseArguments(["--completions"]) }
    }

    /// As Scripts/install runs it: the script on stdout, status 0; another shell, status 2.
    @Test func testDirwatchPrintsEachScript() throws {
        for shell in ShellCompletion.allCases {
            let result = try runChild(EndToEndTests.binary.path, ["--completions", shell.rawValue])
            #expect(result.status == 0, "\(shell): \(result.errors)")
            #expect(result.output == shell.script(), "\(shell)")
            #expect(result.errors == "")
        }
        let wrong = try runChild(EndToEndTests.binary.path, ["--completions", "tcsh"])
        #expect(wrong.status == 2)
        #expect(wrong.output == "")
        #expect(wrong.errors == "dirwatch: --completions takes bash, zsh or fish, not 'tcsh' (see dirwatch --help)\n")
    }

    @Test func testSummariesAreShortAndWithoutAsides() {
        for option in OptionDescriptor.table {
            let summary = ShellCompletion.summary(option.help)
            #expect(!summary.isEmpty && summary.count <= 80, "\(option.id): \(summary)")
            #expect(summary.trimmingSpaces() == summary && !summary.contains("  "), "\(summary)")
        }
        #expect(ShellCompletion.summary("with --exec: no run at start; wait") == "no run at start (with --exec)")
        #expect(
            ShellCompletion.summary("automatic (the default), inotify, or fanotify (-r only)")
                == "automatic, inotify, or fanotify")
    }

    // MARK: - bash

    /// What `_dirwatch` puts in COMPREPLY for each command line (its words, the last the one being
    /// completed), sorted; bash run once, in `directory`.
    static func bashCompletions(_ lines: [[String]], in directory: URL) throws -> [[String]] {
        let script = directory.appendingPathComponent("dirwatch.bash")
        try ShellCompletion.bash.script().write(to: script, atomically: true, encoding: .utf8)
        func quoted(_ word: String) -> String { "'" + word.replacing("'", with: #"'\''"#) + "'" }
        var program = "source \(quoted(script.path)) || exit 3\n"
        program += #"t() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _dirwatch; "#
        program += #"printf 'reply'; for w in "${COMPREPLY[@]}"; do printf ' [%s]' "$w"; done; echo; }"# + "\n"
        program += "complete -p dirwatch || exit 4\n"
        for words in lines { program += "t " + words.map(quoted).joined(separator: " ") + "\n" }
        let result = try runChild("/bin/bash", ["--norc", "--noprofile", "-c", program], directory: directory)
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.errors == "", "bash loads the script without a complaint")
        #expect(result.output.hasPrefix("complete -F _dirwatch dirwatch\n"))
        return result.output.split(separator: "\n").filter { $0.hasPrefix("reply") }.map { line in
            line.matches(of: #/\[([^\]]*)\]/#).map { String($0.output.1) }.sorted()
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/bin/bash"), "bash is not installed"))
    func testBashCompletesOptionsValuesAndCommands() throws {
        try withTemporaryDirectory { directory in
            try Data().write(to: directory.appendingPathComponent("a b.txt"))
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent("sub"), withIntermediateDirectories: false)
            let cases: [([String], [String])] = [
                (["dirwatch", "--re"], ["--recursive", "--restart"]),
                (["dirwatch", "-"], Self.tableNames.sorted()),
                (["dirwatch", "--backend", ""], ["automatic", "fanotify", "inotify"]),
                // --backend=in, as bash splits it at the =.
                (["dirwatch", "--backend", "="], ["automatic", "fanotify", "inotify"]),
                (["dirwatch", "--backend", "=", "in"], ["inotify"]),
                (["dirwatch", "--backend=fa"], ["--backend=fanotify"]),
                (["dirwatch", "--completions", "z"], ["zsh"]),
                (
                    ["dirwatch", "-E", "created,mo"],
                    [
                        "created,modified", "created,modify", "created,move", "created,moved",
                        "created,moved_from", "created,moved_to",
                    ]
                ),
                (["dirwatch", "--events", "writer"], ["writerClosed"]),
                // Files for a FILE and for a path, a name with a space whole.
                (["dirwatch", "--file", "a"], ["a b.txt"]),
                (["dirwatch", "--file", "--re"], []),
                (["dirwatch", "s"], ["sub"]),
                (["dirwatch", "--settle", ""], []),
                // After --exec, a command, then its arguments; never dirwatch's options.
                (["dirwatch", ".", "--exec", "printf"], ["printf"]),
                (["dirwatch", ".", "--exec", "make", "--re"], []),
                (["dirwatch", "-x", "make", "a"], ["a b.txt"]),
                (["dirwatch", "--", "--re"], []),
                // A value that looks like an option, or like --exec, is a value.
                (["dirwatch", "--file", "--exec", "--re"], ["--recursive", "--restart"]),
            ]
            let replies = try Self.bashCompletions(cases.map(\.0), in: directory)
            #expect(replies.count == cases.count)
            for ((words, expected), reply) in zip(cases, replies) {
                // compgen -c lists a builtin and each program of the PATH: the same name more than once.
                #expect(Array(Set(reply)).sorted() == expected, "\(words.joined(separator: " "))")
            }
        }
    }

    // MARK: - zsh

    @Test(.enabled(if: installedProgram("zsh") != nil, "zsh is not installed (Debian: apt-get install zsh)"))
    func testZshParsesAndRegistersTheScript() throws {
        let zsh = try #require(installedProgram("zsh"))
        try withTemporaryDirectory { directory in
            let script = directory.appendingPathComponent("_dirwatch")
            try ShellCompletion.zsh.script().write(to: script, atomically: true, encoding: .utf8)
            let parsed = try runChild(zsh, ["-n", script.path])
            #expect(parsed.status == 0 && parsed.errors == "", "zsh -n: \(parsed.errors)")
            // HOME here, and compinit -D: no .zcompdump left in the user's home.
            let home = ["HOME": directory.path, "ZDOTDIR": directory.path]
            // Sourced after compinit, as `source <(dirwatch --completions zsh)` does.
            let sourced = try runChild(
                zsh,
                [
                    "-f", "-c",
                    #"autoload -U compinit && compinit -u -D && source "$1" && print -r -- $_comps[dirwatch]"#,
                    "zsh", script.path,
                ], environment: home)
            #expect(sourced.status == 0 && sourced.errors == "", "\(sourced.errors)")
            #expect(sourced.output == "_dirwatch\n")
            // Found in $fpath by its #compdef line, as Scripts/install places it.
            let autoloaded = try runChild(
                zsh,
                [
                    "-f", "-c",
                    #"fpath=("$1" $fpath); autoload -U compinit && compinit -u -D && print -r -- $_comps[dirwatch]"#,
                    "zsh", directory.path,
                ], environment: home)
            #expect(autoloaded.status == 0 && autoloaded.errors == "", "\(autoloaded.errors)")
            #expect(autoloaded.output == "_dirwatch\n")
        }
    }

    // MARK: - fish

    @Test(.enabled(if: installedProgram("fish") != nil, "fish is not installed (Debian: apt-get install fish)"))
    func testFishCompletesOptionsValuesAndCommands() throws {
        let fish = try #require(installedProgram("fish"))
        try withTemporaryDirectory { directory in
            let script = directory.appendingPathComponent("dirwatch.fish")
            try ShellCompletion.fish.script().write(to: script, atomically: true, encoding: .utf8)
            try Data().write(to: directory.appendingPathComponent("a b.txt"))
            let parsed = try runChild(fish, ["--no-execute", script.path])
            #expect(parsed.status == 0 && parsed.errors == "", "fish -n: \(parsed.errors)")
            let cases: [(String, [String])] = [
                ("dirwatch --rec", ["--recursive"]),
                ("dirwatch --backend ", ["automatic", "fanotify", "inotify"]),
                ("dirwatch --backend=in", ["--backend=inotify"]),
                ("dirwatch --completions f", ["fish"]),
                (
                    "dirwatch -E created,mo",
                    [
                        "created,modified", "created,modify", "created,move", "created,moved",
                        "created,moved_from", "created,moved_to",
                    ]
                ),
                ("dirwatch --file a", ["a b.txt"]),
                ("dirwatch --settle ", []),
                // A value's place offers no option, even for a word that begins with a dash.
                ("dirwatch --exclude -", []),
                ("dirwatch --settle -", []),
                ("dirwatch -e -", []),
                ("dirwatch --backend -", []),
                ("dirwatch . --exec printf", ["printf"]),
                ("dirwatch . --exec make --re", []),
                ("dirwatch -- --re", []),
            ]
            // One fish for every case, each case's candidates after a line of its own.
            var program = "source '\(script.path)' || exit 3\n"
            for (line, _) in cases { program += "echo '== case'; complete -C '\(line)'\n" }
            // Its own HOME: fish writes its history and variables there.
            let result = try runChild(
                fish, ["--no-config", "-c", program],
                environment: [
                    "HOME": directory.path, "XDG_CONFIG_HOME": directory.path,
                    "XDG_DATA_HOME": directory.path,
                ], directory: directory)
            #expect(result.status == 0 && result.errors == "", "\(result.errors)")
            let replies = result.output.components(separatedBy: "== case\n").dropFirst().map { block in
                block.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) }.sorted()
            }
            #expect(replies.count == cases.count)
            for ((line, expected), reply) in zip(cases, replies) {
                #expect(Array(Set(reply)).sorted() == expected, "\(line)")
            }
            // Every option, short and long, for a word starting with a dash.
            let all = try runChild(
                fish, ["--no-config", "-c", "source '\(script.path)'; complete -C 'dirwatch -'"],
                environment: [
                    "HOME": directory.path, "XDG_CONFIG_HOME": directory.path, "XDG_DATA_HOME": directory.path,
                ])
            let names = all.output.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) }
            #expect(Set(names) == Set(Self.tableNames))
        }
    }
}

/// `dirwatch --version`: the commit it was built from, when the build named one.
@Suite struct VersionTests {
    @Test func testTheVersionNamesTheCommitWhenThereIsOne() {
        #expect(versionLine(commit: "") == "dirwatch 0.1.0 (DirectoryWatcher, inotify + epoll)")
        #expect(versionLine(commit: "abc123") == "dirwatch 0.1.0 (commit abc123; DirectoryWatcher, inotify + epoll)")
        #expect(version == versionLine(commit: String(cString: cdw_build_commit())))
    }

    @Test func testDirwatchPrintsItsVersion() throws {
        let result = try runChild(EndToEndTests.binary.path, ["--version"])
        #expect(result.status == 0)
        #expect(result.output == version + "\n")
        #expect(result.output.hasPrefix("dirwatch 0.1.0 ("))
    }
}
