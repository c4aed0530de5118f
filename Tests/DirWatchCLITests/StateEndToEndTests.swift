import Foundation
import XCTest

/// `dirwatch --state`: what changed while it was not running is printed first, marked, then live
/// changes; a SIGKILL at any point loses nothing.
class StateEndToEndTests: XCTestCase {
    var directory: URL!
    var stateFolder: URL!
    var statePath: String { stateFolder.appendingPathComponent("dirwatch.state").path }
    var kills: Int { 8 }

    override func setUpWithError() throws {
        let base = FileManager.default.temporaryDirectory
        directory = base.appendingPathComponent("dirwatch-state-\(UUID().uuidString)")
        stateFolder = base.appendingPathComponent("dirwatch-state-file-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: stateFolder, withIntermediateDirectories: true)
    }

    override func tearDown() {
        // (Not set when the stress suite's setUp skipped.)
        for folder in [directory, stateFolder].compactMap({ $0 }) { try? FileManager.default.removeItem(at: folder) }
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    func touch(_ name: String) {
        let fd = open(path(name), O_CREAT | O_WRONLY, 0o644)
        precondition(fd >= 0)
        close(fd)
    }

    func start(_ extra: [String] = []) throws -> Run {
        let run = try Run(EndToEndTests.binary, ["--json", "--state", statePath] + extra + [directory.path])
        try run.waitUntilEstablished()
        return run
    }

    func testWhatChangedWhileStoppedIsPrintedMarkedThenLiveChanges() throws {
        touch("kept")
        touch("removed")
        touch("renamed")
        var run = try start()
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)

        touch("created")
        XCTAssertEqual(unlink(path("removed")), 0)
        XCTAssertEqual(rename(path("renamed"), path("renamed-to")), 0)
        run = try start()
        var found: Set<NSDictionary> = []
        for _ in 0..<3 { found.insert(try run.nextJSON()) }
        XCTAssertEqual(
            found,
            [
                ["kind": "created", "path": path("created"), "isDirectory": false, "whileStopped": true],
                ["kind": "removed", "path": path("removed"), "isDirectory": false, "whileStopped": true],
                [
                    "kind": "renamed", "path": path("renamed-to"), "oldPath": path("renamed"), "isDirectory": false,
                    "whileStopped": true,
                ],
            ])
        touch("live")
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": path("live"), "isDirectory": false])
        run.terminate()
        XCTAssertEqual(try run.waitForExit(), 0)
        XCTAssertEqual(run.remainingOutput(), "")

        // Saved at SIGTERM: nothing again.
        run = try start()
        touch("sentinel")
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": path("sentinel"), "isDirectory": false])
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    /// `-r` through fanotify (root has it) and through inotify: a directory made with content and
    /// a subtree renamed while stopped.
    func testATreeThroughEitherBackend() throws {
        for backend in ["fanotify", "inotify"] {
            try? FileManager.default.removeItem(atPath: statePath)
            try? FileManager.default.removeItem(atPath: statePath + ".journal")
            let old = "old-\(backend)"
            try FileManager.default.createDirectory(atPath: path(old + "/inner"), withIntermediateDirectories: true)
            touch(old + "/inner/file")
            var run = try start(["-r", "--backend", backend])
            run.interrupt()
            XCTAssertEqual(try run.waitForExit(), 0)

            let made = "made-\(backend)"
            try FileManager.default.createDirectory(atPath: path(made), withIntermediateDirectories: true)
            touch(made + "/file")
            XCTAssertEqual(rename(path(old), path("new-\(backend)")), 0)
            run = try start(["-r", "--backend", backend])
            var found: Set<NSDictionary> = []
            for _ in 0..<3 { found.insert(try run.nextJSON()) }
            XCTAssertEqual(
                found,
                [
                    ["kind": "created", "path": path(made), "isDirectory": true, "whileStopped": true],
                    ["kind": "created", "path": path(made + "/file"), "isDirectory": false, "whileStopped": true],
                    [
                        "kind": "renamed", "path": path("new-\(backend)"), "oldPath": path(old), "isDirectory": true,
                        "whileStopped": true,
                    ],
                ], backend)
            touch("new-\(backend)/inner/live")
            XCTAssertEqual(
                try run.nextJSON(),
                ["kind": "created", "path": path("new-\(backend)/inner/live"), "isDirectory": false],
                "live below the renamed subtree, \(backend)")
            run.interrupt()
            XCTAssertEqual(try run.waitForExit(), 0)
        }
    }

    /// A reader that exits with lines unread in the pipe (a broker's client that reads a line,
    /// then fails to connect): dirwatch does not count those lines as delivered. It ends without
    /// saving, and the next start prints them again.
    func testLinesLeftInThePipeByAReaderThatExitsComeAgain() throws {
        var run = try start()
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
        let names = (0..<50).map { "made-\($0)" }
        names.forEach(touch)

        // sh's `read` takes one line, byte by byte, and the subshell exits: 49 are left unread.
        let dirwatch = EndToEndTests.binary.path
        let pipeline = "\"$0\" --json --state \"$1\" \"$2\" | (read -r line; printf '%s\\n' \"$line\")"
        run = try Run(URL(fileURLWithPath: "/bin/sh"), ["-c", pipeline, dirwatch, statePath, directory.path])
        // (Not waited for "Watches established.": the first batch is on its way as the start
        // returns, and on a busy machine dirwatch may be done, its reader gone, before it says so.)
        let first = try run.nextJSON()
        XCTAssertEqual(first["whileStopped"] as? Bool, true, "\(first)")
        // dirwatch ends by itself: the pipe's reader is gone.
        XCTAssertEqual(try run.waitForExit(), 0, run.errorOutput())

        try assertPrintedAgain(names)
    }

    /// `dirwatch --json --state` into a pipe the test reads by hand, started once the state
    /// knows the folder and 100 files have been made since: it prints them at once. The pipe's
    /// reader has read the start of the first line, and stopped reading (a pager left open, a
    /// stuck client).
    func startIntoAStalledReader() throws -> (Process, FileHandle, XCTestExpectation, [String]) {
        let run = try start()
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
        let names = (0..<100).map { "made-\($0)" }
        names.forEach(touch)

        let output = Pipe()
        let dirwatch = Process()
        dirwatch.executableURL = EndToEndTests.binary
        dirwatch.arguments = ["--json", "--state", statePath, directory.path]
        dirwatch.standardOutput = output
        dirwatch.standardError = FileHandle.nullDevice
        let exited = expectation(description: "dirwatch exited")
        dirwatch.terminationHandler = { _ in exited.fulfill() }
        try dirwatch.run()
        let head = try XCTUnwrap(output.fileHandleForReading.read(upToCount: 16))
        XCTAssertTrue(String(decoding: head, as: UTF8.self).hasPrefix("{"), "\(head)")
        return (dirwatch, output.fileHandleForReading, exited, names)
    }

    /// Waits for `exited`; a dirwatch still running after 20 s fails the test and is killed, so
    /// that its status can be read.
    func waitForExit(_ dirwatch: Process, _ exited: XCTestExpectation) {
        wait(for: [exited], timeout: 20)
        if dirwatch.isRunning {
            kill(dirwatch.processIdentifier, SIGKILL)
            dirwatch.waitUntilExit()
        }
    }

    /// The next start prints each of `names` again, made while stopped.
    func assertPrintedAgain(_ names: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let run = try start()
        var again: Set<String> = []
        for _ in names {
            let change = try run.nextJSON()
            XCTAssertEqual(change["whileStopped"] as? Bool, true, file: file, line: line)
            again.insert(URL(fileURLWithPath: try XCTUnwrap(change["path"] as? String)).lastPathComponent)
        }
        XCTAssertEqual(again, Set(names), "every line the reader did not read, printed again", file: file, line: line)
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    /// A stop saves once the reader has read what was printed: read to the end, nothing comes again.
    func testAStopSavesOnceTheReaderHasReadEverything() throws {
        let (dirwatch, reader, exited, _) = try startIntoAStalledReader()
        kill(dirwatch.processIdentifier, SIGINT)
        _ = try reader.readToEnd()  // dirwatch's end closes it
        waitForExit(dirwatch, exited)
        XCTAssertEqual(dirwatch.terminationStatus, 0)

        let run = try start()
        touch("sentinel")
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": path("sentinel"), "isDirectory": false])
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    /// A stop does not count what is still in the pipe: when the reader goes away with it,
    /// dirwatch ends unsaved, and the next start prints those lines again.
    func testAStopDoesNotSaveLinesTheReaderTookAwayUnread() throws {
        let (dirwatch, reader, exited, names) = try startIntoAStalledReader()
        kill(dirwatch.processIdentifier, SIGINT)
        try reader.close()
        waitForExit(dirwatch, exited)
        XCTAssertEqual(dirwatch.terminationStatus, 0)
        try assertPrintedAgain(names)
    }

    /// A stop waiting for a stalled reader does not hang: a second signal ends dirwatch at once,
    /// unsaved. (Two kinds of signal: a second of the same kind, still pending, would merge.)
    func testASecondSignalEndsAStopThatWaitsForAStalledReader() throws {
        let (dirwatch, reader, exited, names) = try startIntoAStalledReader()
        kill(dirwatch.processIdentifier, SIGINT)
        kill(dirwatch.processIdentifier, SIGTERM)
        waitForExit(dirwatch, exited)
        XCTAssertEqual(dirwatch.terminationReason, .exit)
        XCTAssertEqual(dirwatch.terminationStatus, 0)
        try reader.close()
        try assertPrintedAgain(names)
    }

    func testStateNeedsOnePath() throws {
        let run = try Run(EndToEndTests.binary, ["--state", statePath, directory.path, directory.path + "/.."])
        XCTAssertEqual(try run.waitForExit(), 2)
        XCTAssertTrue(run.errorOutput().contains("--state keeps the state of one PATH"), run.errorOutput())
    }

    /// A busy run killed (SIGKILL) at random points, changes made while nothing runs, restarted
    /// each time: every line printed, applied to a model of the directory, reconciles exactly
    /// with the disk at the end. Lines printed again after a kill (at least once) apply again
    /// harmlessly; a change missing would leave the model wrong.
    func testSIGKILLAtRandomPointsLosesNothing() throws {
        var random = SeededRandom(seed: UInt64(ProcessInfo.processInfo.environment["DIRWATCH_STATE_SEED"] ?? "") ?? 29)
        let names = (0..<24).map { "f\($0)" }
        var onDisk: Set<String> = []
        var model: Set<String> = []
        // What happened, in order: printed when the model and the disk disagree, so that a failure
        // in a CI log can be followed round by round.
        var history: [String] = []
        func apply(_ lines: [String]) throws {
            for line in lines {
                history.append("  printed \(line)")
                let change = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], line)
                let name = URL(fileURLWithPath: try XCTUnwrap(change["path"] as? String)).lastPathComponent
                switch change["kind"] as? String {
                case "created", "movedIn": model.insert(name)
                case "removed", "movedOut": model.remove(name)
                case "renamed":
                    model.remove(URL(fileURLWithPath: try XCTUnwrap(change["oldPath"] as? String)).lastPathComponent)
                    model.insert(name)
                case "exchanged":
                    // Two names swapped: both are there.
                    model.insert(URL(fileURLWithPath: try XCTUnwrap(change["oldPath"] as? String)).lastPathComponent)
                    model.insert(name)
                case "modified", "attributesChanged": break
                default: XCTFail("unexpected: \(line)")
                }
            }
        }
        func change(_ count: Int) {
            for _ in 0..<count {
                let name = names[random.next(below: names.count)]
                if !onDisk.contains(name) {
                    history.append("create \(name)")
                    touch(name)
                    onDisk.insert(name)
                } else if random.next(below: 2) == 0 {
                    history.append("remove \(name)")
                    XCTAssertEqual(unlink(path(name)), 0)
                    onDisk.remove(name)
                } else {
                    let target = names[random.next(below: names.count)]
                    history.append("rename \(name) \(target)")
                    XCTAssertEqual(rename(path(name), path(target)), 0)
                    onDisk.remove(name)
                    onDisk.insert(target)
                }
            }
        }
        for round in 0..<kills {
            // Some runs save every 5 ms too, so the kill lands anywhere around a save.
            history.append("round \(round): start\(round % 2 == 0 ? " --state-interval 0.005" : "")")
            let run = try start(round % 2 == 0 ? ["--state-interval", "0.005"] : [])
            let made = random.next(below: 40)
            change(made)
            // Killed at once, or once a line or two are out (each change prints at least one).
            // What was read before the kill counts as printed: a save may follow it at once.
            var read: [String] = []
            for _ in 0..<min(random.next(below: 3), made) { read.append(try run.nextLine()) }
            run.killNow()
            _ = try run.waitForExit()
            history.append("killed, \(read.count) lines read before")
            try apply(read + run.takeLines())
            history.append("stopped:")
            change(random.next(below: 8))
        }
        history.append("last start")
        let run = try start()
        touch("sentinel")
        var lines: [String] = []
        while true {
            let line = try run.nextLine()
            if line.contains(path("sentinel")) { break }
            lines.append(line)
        }
        try apply(lines)
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
        XCTAssertEqual(
            model, onDisk,
            "the model, from the lines printed, is the disk; what happened:\n\(history.joined(separator: "\n"))")
        let listed = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path)).subtracting(["sentinel"])
        XCTAssertEqual(listed, onDisk)
    }
}

/// A small deterministic generator (SplitMix64), so a failing seed can be run again.
struct SeededRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next(below bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(bound))
    }
}
