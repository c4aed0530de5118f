import DirectoryWatcher
import Testing

@testable import DirWatchCLI

@Suite struct ArgumentTests {
    private func options(_ arguments: [String]) throws -> Options {
        guard case .watch(let options) = try parseArguments(arguments) else {
            Issue.record("expected a watch")
            return Options()
        }
        return options
    }

    private func usageError(_ arguments: [String]) -> String? {
        do {
            _ = try parseArguments(arguments)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func testPathsAndFlags() throws {
        let parsed = try options(["-j", "a", "--once", "b", "-e", "*.tmp", "--exclude=.git"])
        #expect(parsed.paths == ["a", "b"])
        #expect(parsed.json)
        #expect(parsed.once)
        #expect(parsed.excludes == ["*.tmp", ".git"])
        #expect(parsed.exec == nil)
    }

    @Test func testExecTakesTheRestVerbatim() throws {
        let parsed = try options([".", "--restart", "--exec", "make", "-j", "--json", "a b"])
        #expect(parsed.exec == ["make", "-j", "--json", "a b"])
        #expect(parsed.restart)
        #expect(!parsed.json, "options after --exec belong to the command")
    }

    @Test func testExecTimingOptions() throws {
        let defaults = try options([".", "--exec", "make"])
        #expect(!defaults.postpone, "the command runs at start")
        #expect(defaults.debounceMilliseconds == 50)
        #expect(defaults.grace == 5)
        let parsed = try options(["-p", "--debounce", "0", "--grace=0.2", ".", "--exec", "make"])
        #expect(parsed.postpone)
        #expect(parsed.debounceMilliseconds == 0)
        #expect(parsed.grace == 0.2)
        #expect(try options(["--postpone", "--debounce=250", ".", "-x", "make"]).postpone)
        #expect(try options(["--debounce=250", ".", "-x", "make"]).debounceMilliseconds == 250)
        #expect(try options(["--grace", "0", ".", "-x", "make"]).grace == 0, "0: SIGKILL at once")
    }

    @Test func testDoubleDashEndsOptions() throws {
        #expect(try options(["--", "-weird-dir", "--json"]).paths == ["-weird-dir", "--json"])
    }

    @Test func testPollTakesAnOptionalInterval() throws {
        guard case .watch(let plain) = try parseArguments(["--poll", "dir"]) else {
            Issue.record("expected a watch")
            return
        }
        #expect(plain.poll == 1, "one second unless told")
        #expect(plain.paths == ["dir"])
        guard case .watch(let timed) = try parseArguments(["--poll", "2.5", "dir"]) else {
            Issue.record("expected a watch")
            return
        }
        #expect(timed.poll == 2.5)
        #expect(timed.paths == ["dir"])
        guard case .watch(let inline) = try parseArguments(["--poll=0.1", "5"]) else {
            Issue.record("expected a watch")
            return
        }
        #expect(inline.poll == 0.1)
        #expect(inline.paths == ["5"], "a directory named like a number, after --poll=")
        guard case .watch(let none) = try parseArguments(["dir"]) else {
            Issue.record("expected a watch")
            return
        }
        #expect(none.poll == nil, "the library chooses")
    }

    @Test func testSettleAndRecursiveParse() throws {
        let parsed = try options(["-r", "--settle", "0.5", "."])
        #expect(parsed.recursive)
        #expect(parsed.settle == 0.5)
        #expect(try options(["--settle=2", "."]).settle == 2)
        let bounded = try options(["--settle", "0.3", "--settle-max=5", "."])
        #expect(bounded.settle == 0.3)
        #expect(bounded.settleMax == 5)
    }

    @Test func testFilesMixWithDirectories() throws {
        let parsed = try options(["-f", "a.conf", "dir", "--file", "b.conf", "--file=c.conf"])
        #expect(parsed.files == ["a.conf", "b.conf", "c.conf"])
        #expect(parsed.paths == ["dir"])
        #expect(try options(["--file", "only.conf"]).paths == [], "a file alone is something to watch")
        #expect(try options(["--file", "--json", "."]).files == ["--json"], "--file takes the next argument")
    }

    @Test func testEventsDefaultToWhatDirwatchAlwaysPrinted() throws {
        #expect(try options(["."]).events == DirectoryWatcher.Events.default)
    }

    @Test func testEventListsAndTheirUnion() throws {
        #expect(try options(["--event", "created,removed", "."]).events == [.created, .removed])
        #expect(
            try options(["-E", "opened", "--events", "writerClosed", "--event=moved", "."]).events == [
                .opened, .writerClosed, .moved,
            ], "repeated: the union")
        #expect(try options(["-E", "modified,modified", "."]).events == [.modified])
        #expect(try options(["-E", "default,opened", "."]).events == DirectoryWatcher.Events.default.union(.opened))
        #expect(try options(["-E", "all", "."]).events == DirectoryWatcher.Events.all)
        let mixedCase = try options(["-E", "OPENED,Close_Write,attributes", "."])
        #expect(mixedCase.events == [.opened, .writerClosed, .attributesChanged], "case does not matter")
    }

    @Test func testInotifywaitEventNames() throws {
        let names: [(String, DirectoryWatcher.Events)] = [
            ("create", .created), ("delete", .removed), ("modify", .modified), ("attrib", .attributesChanged),
            ("move", .moved), ("moved_from", .moved), ("moved_to", .moved), ("open", .opened),
            ("access", .accessed), ("close_write", .writerClosed), ("close_nowrite", .readerClosed),
            ("close", [.writerClosed, .readerClosed]),
        ]
        for (name, events) in names {
            #expect(try options(["-E", name, "."]).events == events, "\(name)")
        }
        #expect(try options(["-E", "create,delete,modify,attrib,move", "."]).events == DirectoryWatcher.Events.default)
    }

    @Test func testHelpAndVersion() throws {
        #expect(try parseArguments(["--help"]) == .help)
        #expect(try parseArguments([".", "-h"]) == .help)
        #expect(try parseArguments(["--version"]) == .version)
    }

    @Test func testUsageErrorsAreOneLineAndNameTheProblem() {
        let cases: [([String], String)] = [
            ([], "no directory to watch"),
            (["--bogus", "."], "unknown option '--bogus'"),
            (["--exclude"], "--exclude needs a value"),
            (["--exclude", "", "."], "--exclude needs a non-empty pattern"),
            (["--settle", "soon", "."], "--settle takes a number of seconds above 0 and at most 1000000, not 'soon'"),
            (["--settle", "-1", "."], "--settle takes a number of seconds above 0 and at most 1000000, not '-1'"),
            (["--settle", "0", "."], "--settle takes a number of seconds above 0 and at most 1000000, not '0'"),
            (["--settle=", "."], "--settle takes a number of seconds above 0 and at most 1000000, not ''"),
            (["--settle", "nan", "."], "--settle takes a number of seconds above 0 and at most 1000000, not 'nan'"),
            (["--settle", "1e12", "."], "--settle takes a number of seconds above 0 and at most 1000000, not '1e12'"),
            (["--settle"], "--settle needs a value"),
            (["--poll=0", "."], "--poll takes a number of seconds above 0 and at most 1000000, not '0'"),
            (["--poll=soon", "."], "--poll takes a number of seconds above 0 and at most 1000000, not 'soon'"),
            (
                ["--settle-max", "0", "."],
                "--settle-max takes a number of seconds above 0 and at most 1000000, not '0'"
            ),
            (["--settle-max", "2", "."], "--settle-max goes with --settle"),
            (["--settle", "2", "--settle-max", "1", "."], "--settle-max (1.0) must be at least --settle (2.0)"),
            ([".", "--exec"], "--exec needs a command"),
            (["--restart", "."], "--restart goes with --exec"),
            (["-p", "."], "-p goes with --exec"),
            (["--postpone", "."], "--postpone goes with --exec"),
            (["--debounce", "100", "."], "--debounce goes with --exec"),
            (["--grace=1", "."], "--grace goes with --exec"),
            (["--postpone=yes", "."], "--postpone takes no value"),
            (["--debounce"], "--debounce needs a value"),
            (
                ["--debounce", "0.5", ".", "-x", "make"],
                "--debounce takes a whole number of milliseconds from 0 to 1000000000, not '0.5'"
            ),
            (
                ["--debounce", "-1", ".", "-x", "make"],
                "--debounce takes a whole number of milliseconds from 0 to 1000000000, not '-1'"
            ),
            (
                ["--debounce=", ".", "-x", "make"],
                "--debounce takes a whole number of milliseconds from 0 to 1000000000, not ''"
            ),
            (
                ["--grace", "soon", ".", "-x", "make"],
                "--grace takes a number of seconds from 0 to 1000000, not 'soon'"
            ),
            (["--grace", "-1", ".", "-x", "make"], "--grace takes a number of seconds from 0 to 1000000, not '-1'"),
            (["--grace", "inf", ".", "-x", "make"], "--grace takes a number of seconds from 0 to 1000000, not 'inf'"),
            ([""], "an empty path is not a directory; use . for the current one"),
            (["--json=yes", "."], "--json takes no value"),
            (["--file"], "--file needs a value"),
            (["-f"], "-f needs a value"),
            (["--file", "", "."], "--file needs a non-empty path"),
            (["--file=", "."], "--file needs a non-empty path"),
            (["--event"], "--event needs a value"),
            (["--event", "", "."], "--event needs a kind, such as created,modified"),
            (["--events=", "."], "--events needs a kind, such as created,modified"),
            (["-E", "opened,", "."], "-E has an empty kind in 'opened,'"),
            (["-E", "opened,,created", "."], "-E has an empty kind in 'opened,,created'"),
            (
                ["--event", "created,renamed", "."],
                "--event: unknown kind 'renamed'; valid: created, removed, modified, attributesChanged "
                    + "(or attributes), moved (renamed, exchanged, movedIn, movedOut), opened, accessed, writerClosed, "
                    + "readerClosed, all, default, or inotifywait's create, delete, modify, attrib, move, "
                    + "moved_from, moved_to, open, access, close_write, close_nowrite, close"
            ),
        ]
        for (arguments, message) in cases {
            let error = usageError(arguments)
            #expect(error == "dirwatch: \(message) (see dirwatch --help)", "\(arguments)")
            #expect(!(error?.contains("\n") ?? true))
        }
    }
}
