import Foundation
import Testing

@testable import DirWatchCLI

/// ``OptionDescriptor/table`` against the parser, `--help` and the manual: what one accepts, the
/// others list. The help text is read back as a user reads it, so a hand edit of it, of the
/// parser or of the manual that leaves one of them behind fails here.
@Suite struct OptionTableTests {
    /// Every spelling in the table, with its dashes.
    static let tableNames = OptionDescriptor.table.flatMap(\.names)

    /// The lines of `--help`'s option list: from "options:" to the blank line after it.
    static let helpOptionLines: [Substring] = {
        let lines = usage.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: "options:"),
            let end = lines[(start + 1)...].firstIndex(of: "")
        else { return [] }
        return Array(lines[(start + 1)..<end])
    }()

    /// The option names `--help` shows, in its order: the words starting with a dash on each line
    /// of its option list that does not continue a help text.
    static let helpNames: [String] = helpOptionLines.flatMap { line -> [String] in
        guard !isContinuation(line) else { return [] }
        // The names and their value, up to the two spaces before the help (or the line's end).
        let head = line.drop { $0 == " " }.components(separatedBy: "  ")[0]
        return head.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init).filter {
            $0.hasPrefix("-")
        }
    }

    /// A line of help text under an option's first line: blank up to the help column.
    static func isContinuation(_ line: Substring) -> Bool {
        line.prefix(OptionDescriptor.helpColumn).allSatisfy { $0 == " " }
    }

    /// Whether the parser knows `name` as an option: it may still refuse the command line, for
    /// another reason than an unknown option.
    static func isRecognized(_ name: String) -> Bool {
        do {
            _ = try parseArguments([name])
            return true
        } catch {
            return !error.message.hasPrefix("unknown option")
        }
    }

    @Test func testEveryIDIsInTheTableOnceAndEveryNameOnce() {
        let ids = OptionDescriptor.table.map(\.id)
        #expect(ids.count == OptionDescriptor.ID.allCases.count)
        #expect(Set(ids) == Set(OptionDescriptor.ID.allCases), "the parser's switch handles each ID")
        #expect(Set(Self.tableNames).count == Self.tableNames.count, "no name for two options")
        for option in OptionDescriptor.table {
            #expect(!option.long.isEmpty)
            for name in option.long {
                #expect(!name.hasPrefix("-") && !name.isEmpty && !name.contains("="), "\(name)")
            }
            #expect(option.short.map { $0 != "-" } ?? true)
            #expect(!option.help.isEmpty, "\(option.id)")
            for name in option.names { #expect(OptionDescriptor.named(name) == option, "\(name)") }
        }
        #expect(OptionDescriptor.named("--") == nil, "-- ends the options; it is not one")
        #expect(OptionDescriptor.named("file") == nil, "names are looked up with their dashes")
    }

    @Test func testHelpListsExactlyTheTable() {
        #expect(Self.helpNames == Self.tableNames, "--help lists the table, in its order")
        #expect(Set(Self.helpNames).count == Self.helpNames.count, "each name once")
        #expect(Self.helpNames.contains("--events"), "an alias is listed too")
        #expect(Self.helpNames.contains("--settle-max"), "a name on a line of its own is read too")
    }

    @Test func testTheParserAcceptsExactlyWhatHelpLists() {
        for name in Self.helpNames { #expect(Self.isRecognized(name), "--help lists \(name)") }
        for name in Self.tableNames { #expect(Self.isRecognized(name), "the table lists \(name)") }
        // Every one-character option there could be: the parser knows those --help lists, no other.
        let characters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        for character in characters {
            let name = "-\(character)"
            #expect(Self.isRecognized(name) == Self.helpNames.contains(name), "\(name)")
        }
        // Near misses of listed long names are unknown.
        for name in ["--files", "--Json", "--exec-", "--settlemax", "--event-", "--", "---json"] {
            #expect(!Self.helpNames.contains(name))
            if name != "--" { #expect(!Self.isRecognized(name), "\(name)") }
        }
    }

    /// A value each option takes, to try it alone with a path.
    static let samples: [OptionDescriptor.ID: String] = [
        .file: "a.conf", .event: "created", .exclude: "*.tmp", .debounce: "10", .grace: "1", .backend: "inotify",
        .poll: "2", .settle: "1", .settleMax: "2", .state: "dirwatch.state", .stateInterval: "5",
        .completions: "bash",
    ]

    /// What the table says of each option's value and of --exec is what the parser does.
    @Test func testValuesAndExecOnlyAreAsTheParserTakesThem() throws {
        for option in OptionDescriptor.table {
            for name in option.names {
                switch option.value {
                case .none:
                    if name.hasPrefix("--") {
                        #expect(throws: UsageError("\(name) takes no value")) {
                            try parseArguments(["\(name)=1", "."])
                        }
                    }
                case .required:
                    #expect(throws: UsageError("\(name) needs a value")) { try parseArguments([name]) }
                    if name.hasPrefix("--") {
                        let sample = try #require(Self.samples[option.id], "\(name)")
                        let withSettle =
                            option.id == .settleMax
                            ? ["--settle", "1"] : option.id == .stateInterval ? ["--state", "dirwatch.state"] : []
                        let exec = option.needsExec ? ["--exec", "true"] : []
                        _ = try parseArguments(withSettle + ["\(name)=\(sample)", "."] + exec)
                    }
                case .optional:
                    guard case .watch(let options) = try parseArguments([name, "."]) else {
                        Issue.record("\(name) alone is a watch")
                        continue
                    }
                    #expect(options.paths == ["."], "\(name) takes no value when no number follows")
                    let sample = try #require(Self.samples[option.id], "\(name)")
                    guard case .watch = try parseArguments(["\(name)=\(sample)", "."]) else {
                        Issue.record("\(name)=\(sample) is a watch")
                        continue
                    }
                case .rest:
                    if name.hasPrefix("--") {
                        #expect(throws: UsageError("\(name) takes no value")) { try parseArguments(["\(name)=true"]) }
                    }
                    #expect(throws: UsageError("--exec needs a command")) { try parseArguments([".", name]) }
                    guard case .watch(let options) = try parseArguments([".", name, "make", "-j"]) else {
                        Issue.record("\(name) is a watch")
                        continue
                    }
                    #expect(options.exec == ["make", "-j"])
                }
                guard option.id != .help, option.id != .version, option.id != .exec else { continue }
                let value = option.value == .none ? [] : [Self.samples[option.id] ?? ""]
                let arguments =
                    [name] + value + ["."]
                    + (option.id == .settleMax || option.id == .compareContent
                        ? ["--settle", "1"] : option.id == .stateInterval ? ["--state", "dirwatch.state"] : [])
                if option.needsExec {
                    #expect(throws: UsageError("\(name) goes with --exec")) { try parseArguments(arguments) }
                    _ = try parseArguments(arguments + ["--exec", "true"])
                } else {
                    _ = try parseArguments(arguments)
                }
            }
        }
    }

    @Test func testHelpAndVersionAreAnswered() throws {
        for name in try #require(OptionDescriptor.table.first { $0.id == .help }).names {
            #expect(try parseArguments([".", name]) == .help)
        }
        for name in try #require(OptionDescriptor.table.first { $0.id == .version }).names {
            #expect(try parseArguments([name]) == .version)
        }
    }

    /// Aligned columns: each option's help starts at the help column, on its first line, or on
    /// the next one when its names do not leave room; no line is wider than the help's width.
    @Test func testHelpIsAlignedAndWrapped() throws {
        #expect(!Self.helpOptionLines.isEmpty)
        for line in usage.split(separator: "\n") {
            #expect(line.count <= helpWidth, "\(line)")
            #expect(line.last != " ", "no trailing space: \(line)")
        }
        let column = OptionDescriptor.helpColumn
        for line in Self.helpOptionLines {
            let characters = Array(line)
            if Self.isContinuation(line) {
                #expect(characters.count > column && characters[column] != " ", "help at the column: \(line)")
            } else {
                // A short name from column 2, or a long one alone from column 6, under the long
                // names of the others.
                #expect(line.hasPrefix("  -") || line.hasPrefix("      --"), "names from column 2: \(line)")
                // Its names alone on the line when they are too long, else its help at the column.
                if line.drop(while: { $0 == " " }).contains("  ") {
                    #expect(String(characters[(column - 2)..<column]) == "  ", "\(line)")
                    #expect(characters[column] != " ", "\(line)")
                }
            }
        }
        // As written by hand before the table: the same look.
        #expect(usage.contains("\n  -f, --file FILE       watch one file by name, through its directory, so that"))
        #expect(usage.contains("\n      --events KINDS    (the union is taken), case-insensitive."))
        #expect(usage.contains("\n  -x, --exec CMD [ARG...]\n                        run CMD with ARGs once at start"))
        #expect(usage.contains("\n      --poll [SECONDS]  poll every SECONDS at most"))
        #expect(usage.contains("\n  -V, --version         show the version\n\nexit status: 0 interrupted"))
        #expect(usage.hasPrefix("usage: dirwatch [options] [PATH...]"))
    }

    /// In a tree, the library never watches a directory that --exclude matches: --help says so.
    @Test func testRecursiveHelpSaysExcludedDirectoriesAreNotWatched() throws {
        let recursive = try #require(OptionDescriptor.table.first { $0.id == .recursive })
        #expect(recursive.help.contains("a directory that --exclude matches is not watched at all"))
        #expect(!usage.contains("still watched"))
    }

    @Test func testWrapCutsAtSpacesWithinTheWidth() {
        #expect(OptionDescriptor.wrap("aa bb cc", width: 5) == ["aa bb", "cc"])
        #expect(OptionDescriptor.wrap("aa bb cc", width: 8) == ["aa bb cc"])
        #expect(OptionDescriptor.wrap("longword a", width: 4) == ["longword", "a"], "a longer word alone")
        #expect(OptionDescriptor.wrap("", width: 4) == [])
    }

    // MARK: - The manual

    /// Docs/DirectoryWatcher.docc/Dirwatch.md's "Options" section, up to the next section (its
    /// subsections, "Running a command" and "Kinds for --event", included).
    static func manualOptions() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let manual = try String(
            contentsOf: root.appendingPathComponent("Docs/DirectoryWatcher.docc/Dirwatch.md"), encoding: .utf8)
        let start = try #require(manual.range(of: "\n## Options\n"), "the manual has an Options section")
        let rest = manual[start.upperBound...]
        return String(rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)])
    }

    @Test func testTheManualListsEveryOption() throws {
        let options = try Self.manualOptions()
        for name in Self.tableNames {
            #expect(options.contains("`\(name)`") || options.contains("`\(name) "), "the manual lists \(name)")
        }
    }

    @Test func testEveryOptionTheManualListsIsInTheTable() throws {
        let options = try Self.manualOptions()
        let long = options.matches(of: #/(?:^|[^\w-])(--[a-z][a-z0-9-]*)/#).map { String($0.output.1) }
        #expect(long.contains("--file") && long.contains("--settle-max"), "the section is read")
        for name in Set(long) { #expect(Self.tableNames.contains(name), "the manual lists \(name)") }
        // The short names, as each item's head spells them: "- `-f FILE`, `--file FILE`: ...".
        var short: [String] = []
        for line in options.split(separator: "\n") where line.hasPrefix("- `-") {
            let head = line.prefix { $0 != ":" }
            short += head.matches(of: #/`(-[A-Za-z0-9])[ `]/#).map { String($0.output.1) }
        }
        #expect(short.contains("-f") && short.contains("-V"), "the items are read")
        for name in short { #expect(Self.tableNames.contains(name), "the manual lists \(name)") }
    }
}
