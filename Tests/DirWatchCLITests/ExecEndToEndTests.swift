import Foundation
import XCTest

/// `dirwatch --exec` driven as a script would drive it. The commands print to dirwatch's stdout
/// (theirs), so each run is a line to wait for; nothing sleeps. A run that should not happen
/// would print a line before the one waited for.
class ExecEndToEndTests: XCTestCase {
    /// Batches of 2,000 paths here (already past what DIRWATCH_PATHS holds); 10,000 in the
    /// stress suite.
    var scale: Scale { .fast }
    var batchSize: Int { scale == .stress ? 10_000 : 2_000 }

    private var directory: URL!
    /// Outside the watched directory: the commands' files, the directories moved in.
    private var outside: URL!

    override func setUpWithError() throws {
        let temporary = FileManager.default.temporaryDirectory
        directory = temporary.appendingPathComponent("dirwatch-exec-e2e-\(UUID().uuidString)")
        outside = temporary.appendingPathComponent("dirwatch-exec-outside-\(UUID().uuidString)")
        for folder in [directory!, outside!] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
    }

    override func tearDown() {
        // Nil when the test was skipped before its setUp made them.
        for folder in [directory, outside] {
            if let folder { try? FileManager.default.removeItem(at: folder) }
        }
    }

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    private func dirwatch(_ arguments: [String]) throws -> Run {
        let run = try Run(EndToEndTests.binary, arguments)
        try run.waitUntilEstablished()
        return run
    }

    /// As touch(1) makes a file: created, then its times set (attributesChanged), two events
    /// the kernel may hand over in two reads.
    private func touch(_ path: String, file: StaticString = #filePath, line: UInt = #line) {
        let fd = open(path, O_CREAT | O_WRONLY | O_NONBLOCK | O_NOCTTY, 0o666)
        XCTAssertGreaterThanOrEqual(fd, 0, "open \(path)", file: file, line: line)
        XCTAssertEqual(futimens(fd, nil), 0, file: file, line: line)
        close(fd)
    }

    /// A directory of `count` files made outside, then moved into the watched one: with `-r`,
    /// one batch of a `movedIn` and a `created` for each file. Returns the paths it will report.
    private func moveInDirectory(of count: Int) throws -> Set<String> {
        let made = outside.appendingPathComponent("batch")
        try FileManager.default.createDirectory(at: made, withIntermediateDirectories: false)
        // Long names, so that the paths are well over DIRWATCH_PATHS's 128 KiB.
        let names = (0..<count).map { String(format: "a-file-with-a-rather-long-name-%05d", $0) }
        for name in names {
            let fd = open(made.appendingPathComponent(name).path, O_CREAT | O_WRONLY, 0o644)
            XCTAssertGreaterThanOrEqual(fd, 0)
            close(fd)
        }
        XCTAssertEqual(rename(made.path, path("batch")), 0)
        return Set([path("batch")] + names.map { path("batch/" + $0) })
    }

    /// The command runs once at start, with an empty batch, as entr and watchexec do; with
    /// `--postpone` (`-p`) it waits for the first change.
    func testExecRunsAtStartUnlessPostponed() throws {
        let script = #"n=$(wc -c); echo "run $DIRWATCH_COUNT [${DIRWATCH_PATHS-unset}] stdin: ${n##* } bytes""#
        let run = try dirwatch([directory.path, "--exec", "/bin/sh", "-c", script])
        XCTAssertEqual(
            try run.nextLine(), "run 0 [] stdin: 0 bytes", "at start: nothing on stdin, DIRWATCH_PATHS empty")
        touch(path("a"))
        XCTAssertTrue(try run.nextLine().hasPrefix("run 1 [\(path("a"))] stdin: "))
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
        XCTAssertEqual(run.remainingOutput(), "")

        for postpone in ["--postpone", "-p"] {
            let postponed = try dirwatch([postpone, directory.path, "--exec", "/bin/sh", "-c", script])
            touch(path("b\(postpone)"))
            // A run at start would have printed its line first.
            XCTAssertTrue(try postponed.nextLine().hasPrefix("run 1 [\(path("b\(postpone)"))] stdin: "), postpone)
            postponed.interrupt()
            XCTAssertEqual(try postponed.waitForExit(), 0)
            XCTAssertEqual(postponed.remainingOutput(), "")
        }
    }

    /// One touch(1) is one run with the path once, though it is two changes, both on stdin. The
    /// command also writes into the watched directory, a file that `--exclude` leaves out, so it
    /// does not run itself again: the next line is the next touch's run.
    func testOneTouchIsOneRunWithThePathOnce() throws {
        let script = #"""
            echo "$DIRWATCH_PATHS" >> "$1/runs.log"
            n=$(wc -l)
            echo "run $DIRWATCH_COUNT: $DIRWATCH_PATHS (${n##* } changes)"
            """#
        let run = try dirwatch([
            "-p", "--exclude", "runs.log", directory.path, "-x", "/bin/sh", "-c", script, "sh", directory.path,
        ])
        touch(path("first"))
        XCTAssertEqual(try run.nextLine(), "run 1: \(path("first")) (2 changes)")
        touch(path("second"))
        XCTAssertEqual(try run.nextLine(), "run 1: \(path("second")) (2 changes)", "the first touch ran once")
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
        XCTAssertEqual(run.remainingOutput(), "")
        XCTAssertEqual(
            try String(contentsOfFile: path("runs.log"), encoding: .utf8), "\(path("first"))\n\(path("second"))\n")
    }

    /// A batch of ``batchSize`` files and their directory: far past what one environment string
    /// may hold (execve would fail with E2BIG). Each run gets its batch on stdin in full, and
    /// DIRWATCH_COUNT says how many; a run whose paths do not fit has DIRWATCH_PATHS unset; every
    /// path reaches the command exactly once. How many runs that takes depends on how the moved-in
    /// tree's listing falls against the debounce window (one run on a quiet machine), so the test
    /// does not count them. The next, small batch has DIRWATCH_PATHS again.
    func testALargeBatchReachesTheCommandInFull() throws {
        let received = outside.appendingPathComponent("stdin.jsonl").path
        let script = #"cat >> "$1"; echo "count=$DIRWATCH_COUNT paths=${DIRWATCH_PATHS+set}""#
        let run = try dirwatch(["-r", "-p", directory.path, "--exec", "/bin/sh", "-c", script, "sh", received])
        let expected = try moveInDirectory(of: batchSize)
        // The shortest path of the batch: a run of more paths than fit in 128 KiB at that length
        // cannot have them in its environment.
        let shortest = expected.map(\.utf8.count).min() ?? 1
        var total = 0
        while total < expected.count {
            let line = try run.nextLine()
            let fields = Dictionary(
                uniqueKeysWithValues: line.split(separator: " ").map { field in
                    let parts = field.split(separator: "=", maxSplits: 1)
                    return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
                })
            let count = try XCTUnwrap(fields["count"].flatMap { Int($0) }, line)
            if count * (shortest + 1) > 128 * 1024 {
                XCTAssertEqual(fields["paths"], "", "DIRWATCH_PATHS unset when the paths do not fit: \(line)")
            }
            total += count
        }
        XCTAssertEqual(total, expected.count, "no path more than once")
        let lines = try String(contentsOfFile: received, encoding: .utf8).split(separator: "\n")
        var paths: [String] = []
        for line in lines {
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            paths.append(try XCTUnwrap(object["path"] as? String))
        }
        XCTAssertEqual(paths.count, expected.count, "stdin had the batch in full, each change once")
        XCTAssertEqual(Set(paths), expected)

        touch(path("small"))
        XCTAssertEqual(try run.nextLine(), "count=1 paths=set")
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
        XCTAssertEqual(run.remainingOutput(), "")
    }

    /// A run that never reads its stdin and never ends, given a batch of megabytes (a pipe holds
    /// 64 KiB): dirwatch is not stuck writing it. Each batch restarts the run; however the batch
    /// falls into runs, every path is counted once. The next change restarts the run.
    func testACommandThatNeverReadsItsStdinDoesNotHoldUpTheNextRun() throws {
        let script = #"echo "run $DIRWATCH_COUNT"; exec sleep 1000"#
        let run = try dirwatch(["-r", "-p", "--restart", directory.path, "--exec", "/bin/sh", "-c", script])
        let expected = try moveInDirectory(of: batchSize)
        var total = 0
        while total < expected.count {
            let line = try run.nextLine()
            XCTAssertTrue(line.hasPrefix("run "), line)
            total += try XCTUnwrap(Int(line.dropFirst(4)), line)
        }
        XCTAssertEqual(total, expected.count, "no path more than once")
        touch(path("next"))
        XCTAssertEqual(try run.nextLine(), "run 1")
        run.terminate()
        XCTAssertEqual(try run.waitForExit(), 0, "sleep ends on SIGTERM: a clean stop")
        XCTAssertEqual(run.remainingOutput(), "")
    }

    /// A command that ignores SIGTERM is sent SIGKILL once the grace period is over; dirwatch
    /// then exits 4.
    func testACommandThatIgnoresSIGTERMIsKilledAfterTheGracePeriod() throws {
        let script = #"trap '' TERM; echo "started $$"; exec sleep 1000"#
        let run = try dirwatch(["--grace", "0.2", directory.path, "--exec", "/bin/sh", "-c", script])
        let line = try run.nextLine()
        let pid = try XCTUnwrap(pid_t(line.dropFirst("started ".count)), line)
        let interrupted = DispatchTime.now().uptimeNanoseconds
        run.interrupt()
        // Its output closes only once the command, which shares it, is gone too.
        XCTAssertEqual(try run.waitForExit(), 4)
        let waited = Double(DispatchTime.now().uptimeNanoseconds - interrupted) / 1e9
        XCTAssertGreaterThanOrEqual(waited, 0.2, "not before the grace period")
        XCTAssertEqual(kill(pid, 0), -1, "the command is gone")
        XCTAssertEqual(run.remainingOutput(), "")
    }

    /// A second SIGINT while the command is being stopped kills it at once, however long the
    /// grace period: dirwatch exits 4.
    func testASecondSIGINTKillsTheCommandAtOnce() throws {
        let script = #"trap 'echo "got TERM"' TERM; echo "started $$"; while :; do sleep 1; done"#
        let run = try dirwatch(["--grace", "1000", directory.path, "--exec", "/bin/sh", "-c", script])
        let line = try run.nextLine()
        let pid = try XCTUnwrap(pid_t(line.dropFirst("started ".count)), line)
        run.interrupt()
        XCTAssertEqual(try run.nextLine(), "got TERM", "the first SIGINT became a SIGTERM to the command")
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 4, "within the test's 20 s, where the grace is 1000 s")
        XCTAssertEqual(kill(pid, 0), -1, "the command is gone")
        XCTAssertEqual(run.remainingOutput(), "")
    }

    /// --restart: a run that ignores SIGTERM is killed after the grace period, and only then
    /// does the next one start.
    func testRestartKillsARunThatIgnoresSIGTERMBeforeTheNextStarts() throws {
        let script = #"trap '' TERM; echo "run $DIRWATCH_COUNT $$"; exec sleep 1000"#
        let run = try dirwatch(["--restart", "--grace", "0.2", directory.path, "-x", "/bin/sh", "-c", script])
        let firstPID = try processLine(run, "run", run: 0)
        let changed = DispatchTime.now().uptimeNanoseconds
        touch(path("a"))
        _ = try processLine(run, "run", run: 1)
        let waited = Double(DispatchTime.now().uptimeNanoseconds - changed) / 1e9
        XCTAssertGreaterThanOrEqual(waited, 0.2, "the grace period came first")
        XCTAssertEqual(kill(firstPID, 0), -1, "the first run was gone before the second started")
        run.terminate()
        XCTAssertEqual(try run.waitForExit(), 4)
        XCTAssertEqual(run.remainingOutput(), "")
    }

    /// Reads a line `prefix N PID` that a process of run N printed, and returns PID.
    private func processLine(_ run: Run, _ prefix: String, run number: Int) throws -> pid_t {
        let line = try run.nextLine()
        let start = "\(prefix) \(number) "
        XCTAssertTrue(line.hasPrefix(start), line)
        return try XCTUnwrap(pid_t(line.dropFirst(start.count)), line)
    }

    /// A command that starts a process in a session of its own (`setsid`) and ends: that process
    /// goes on while nothing changes, is stopped before the next run starts (no --restart), and
    /// at dirwatch's stop; none is left.
    func testAProcessStartedWithSetsidIsStoppedBeforeTheNextRunAndAtTheStop() throws {
        let script = #"setsid sh -c 'echo "grandchild $DIRWATCH_COUNT $$"; exec sleep 1000' & exit 0"#
        let run = try dirwatch(["--grace", "5", directory.path, "--exec", "/bin/sh", "-c", script])
        let first = try processLine(run, "grandchild", run: 0)
        XCTAssertEqual(getsid(first), first, "it left the command's session")
        XCTAssertEqual(kill(first, 0), 0, "it outlives the command's first process")
        touch(path("a"))
        let second = try processLine(run, "grandchild", run: 1)
        XCTAssertEqual(kill(first, 0), -1, "the first run's was gone before the second started")
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0, "ended on SIGTERM: a clean stop")
        XCTAssertEqual(kill(second, 0), -1, "none is left after the stop")
        XCTAssertEqual(run.remainingOutput(), "")
    }

    /// A daemon made by a double fork (its parent ends at once, so it is nobody's child): with
    /// --restart, a batch stops it before the next run; SIGTERM to dirwatch stops the last one.
    func testADoubleForkedDaemonIsStoppedAtARestartAndAtTheStop() throws {
        let script = #"(sh -c 'echo "daemon $DIRWATCH_COUNT $$"; exec sleep 1000' &); exit 0"#
        let run = try dirwatch(["--restart", directory.path, "--exec", "/bin/sh", "-c", script])
        let first = try processLine(run, "daemon", run: 0)
        touch(path("a"))
        let second = try processLine(run, "daemon", run: 1)
        XCTAssertEqual(kill(first, 0), -1, "the first run's daemon was gone before the second started")
        run.terminate()
        XCTAssertEqual(try run.waitForExit(), 0)
        XCTAssertEqual(kill(second, 0), -1, "none is left after the stop")
        XCTAssertEqual(run.remainingOutput(), "")
    }

    /// A `git checkout` between two branches that differ in every one of their files (200 here,
    /// 2,000 in the stress suite), in a tree watched with `--settle 0.2`: one batch, one run of
    /// the command, after git has finished (the index's lock holds the batch until git renames
    /// it away).
    func testAGitCheckoutIsOneBatchAfterItHasFinished() throws {
        guard let git = installedProgram("git") else { throw XCTSkip("git is not installed") }
        let files = scale == .stress ? 2_000 : 200
        let environment = [
            "HOME": outside.path, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "dirwatch",
            "GIT_AUTHOR_EMAIL": "dirwatch@example.com", "GIT_COMMITTER_NAME": "dirwatch",
            "GIT_COMMITTER_EMAIL": "dirwatch@example.com",
            // No gc or maintenance after the commits: one detached in the background would write
            // into .git while the test watches.
            "GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "gc.auto", "GIT_CONFIG_VALUE_0": "0",
            "GIT_CONFIG_KEY_1": "maintenance.auto", "GIT_CONFIG_VALUE_1": "false",
        ]
        func run(_ arguments: [String]) throws {
            let result = try runChild(git, ["-C", directory.path] + arguments, environment: environment)
            XCTAssertEqual(result.status, 0, "git \(arguments.joined(separator: " ")): \(result.errors)")
        }
        func writeFiles(_ text: String) {
            for index in 0..<files {
                let fd = open(path(String(format: "file-%05d", index)), O_CREAT | O_WRONLY | O_TRUNC, 0o644)
                XCTAssertEqual(write(fd, text, text.utf8.count), text.utf8.count)
                close(fd)
            }
        }
        try run(["init", "-q", "-b", "one"])
        writeFiles("one\n")
        try run(["add", "-A"])
        try run(["commit", "-q", "-m", "one"])
        try run(["checkout", "-q", "-b", "two"])
        writeFiles("two\n")
        try run(["commit", "-q", "-a", "-m", "two"])
        try run(["checkout", "-q", "one"])

        // A small batch's paths on the line too: a failure says what came apart.
        let script =
            #"if [ "$DIRWATCH_COUNT" -lt 10 ]; then echo "batch $DIRWATCH_COUNT:" $DIRWATCH_PATHS; "#
            + #"else echo "batch $DIRWATCH_COUNT"; fi"#
        let dirwatch = try dirwatch([
            // (--settle-max: a loaded sanitized run must not reach the maximum wait, which would
            // hand over a batch whatever holds it.)
            "-r", "--settle", "0.2", "--settle-max", "60", "--postpone", "--debounce", "0", directory.path, "--exec",
            "/bin/sh", "-c", script,
        ])
        try run(["checkout", "-q", "two"])
        let finished = DispatchTime.now().uptimeNanoseconds
        let line = try dirwatch.nextLine()
        XCTAssertGreaterThanOrEqual(dirwatch.lastArrival, finished, "after the checkout")
        let count = try XCTUnwrap(Int(line.dropFirst("batch ".count)), line)
        XCTAssertGreaterThanOrEqual(count, files, "every file in the one batch: \(line)")
        // Nothing more: the next run is the next change's.
        touch(path("sentinel"))
        XCTAssertEqual(try dirwatch.nextLine(), "batch 1: \(path("sentinel"))")
        dirwatch.interrupt()
        XCTAssertEqual(try dirwatch.waitForExit(), 0)
    }
}
