import Foundation
import XCTest

/// `dirwatch` driven as a script would drive it: start it, wait for "Watches established.",
/// make changes, read its lines. No sleeps: every wait is for a line or for the process to end.
final class EndToEndTests: XCTestCase {
    /// The `dirwatch` binary that `swift test` built next to the test bundle.
    static let binary: URL = {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        if directory.lastPathComponent == "MacOS" || directory.pathExtension == "xctest" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("dirwatch")
    }()

    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("dirwatch-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: Self.binary.path), "missing \(Self.binary.path)")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// Creates an empty file in place (FileManager.createFile would save through a temporary
    /// file and a rename, which dirwatch rightly reports as such).
    private func touch(_ path: String, file: StaticString = #filePath, line: UInt = #line) {
        let fd = open(path, O_CREAT | O_WRONLY, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0, "open \(path)", file: file, line: line)
        close(fd)
    }

    /// Writes `text` at the end of the file, in place (no temporary file, no rename).
    private func append(_ text: String, to path: String, file: StaticString = #filePath, line: UInt = #line) {
        let fd = open(path, O_CREAT | O_WRONLY | O_APPEND, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0, "open \(path)", file: file, line: line)
        XCTAssertEqual(write(fd, text, text.utf8.count), text.utf8.count, file: file, line: line)
        close(fd)
    }

    /// An editor's save: the new contents written next to the file, then renamed over it.
    func testFileWatchOutlivesAnAtomicSaveAndIgnoresItsSiblings() throws {
        let config = path("app.conf")
        append("a = 1\n", to: config)
        let run = try Run(Self.binary, ["--json", "--file", config])
        try run.waitUntilEstablished()

        append("b = 2\n", to: config)
        XCTAssertEqual(try run.nextJSON(), ["kind": "modified", "path": config, "isDirectory": false])
        append("not watched\n", to: path("sibling"))
        append("a = 3\n", to: config + ".tmp")
        XCTAssertEqual(rename(config + ".tmp", config), 0)
        // Had the sibling or the temporary file been reported, it would come first.
        XCTAssertEqual(
            try run.nextJSON(),
            ["kind": "renamed", "path": config, "oldPath": config + ".tmp", "isDirectory": false])
        append("b = 4\n", to: config)
        XCTAssertEqual(
            try run.nextJSON(), ["kind": "modified", "path": config, "isDirectory": false], "the new file is watched")
        XCTAssertEqual(unlink(config), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "removed", "path": config, "isDirectory": false])
        touch(config)
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": config, "isDirectory": false])

        // The watch ends only with the file's directory, and then dirwatch exits 3.
        XCTAssertEqual(unlink(config), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "removed", "path": config, "isDirectory": false])
        XCTAssertEqual(unlink(path("sibling")), 0)
        XCTAssertEqual(rmdir(directory.path), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "rootRemoved", "path": directory.path, "isDirectory": true])
        XCTAssertEqual(try run.waitForExit(), 3)
        XCTAssertEqual(run.remainingOutput(), "")
    }

    /// A PATH that is a regular file, or a symbolic link to one, is watched as --file watches it
    /// (inotifywait takes files too).
    func testARegularFileAsPathIsWatchedAsAFile() throws {
        let notes = path("notes.txt")
        let link = path("link-to-notes")
        append("one\n", to: notes)
        XCTAssertEqual(symlink(notes, link), 0)
        for given in [notes, link] {
            let run = try Run(Self.binary, ["--json", given])
            try run.waitUntilEstablished()
            touch(path("sibling-\(given == notes ? "of-file" : "of-link")"))
            append("two\n", to: notes)
            XCTAssertEqual(
                try run.nextJSON(), ["kind": "modified", "path": given, "isDirectory": false],
                "changes carry the path as given; the sibling made first is not reported")
            run.interrupt()
            XCTAssertEqual(try run.waitForExit(), 0)
            XCTAssertEqual(run.remainingOutput(), "")
        }
    }

    /// `--event` as inotifywait users write it: opens and finished writes, nothing else.
    func testEventSelectsWhichKindsArePrinted() throws {
        let run = try Run(Self.binary, ["--event", "opened,close_write", directory.path])
        try run.waitUntilEstablished()
        append("report\n", to: path("report.txt"))  // created, opened, modified, writerClosed
        XCTAssertEqual(try run.nextLine(), "opened            \(path("report.txt"))", "no created line before it")
        XCTAssertEqual(try run.nextLine(), "writerClosed      \(path("report.txt"))", "no modified line before it")
        XCTAssertEqual(chmod(path("report.txt"), 0o600), 0)  // attributesChanged: not selected
        XCTAssertEqual(rename(path("report.txt"), path("final.txt")), 0)  // renamed: not selected
        touch(path("marker"))
        XCTAssertEqual(try run.nextLine(), "opened            \(path("marker"))", "nothing between the two files")
        XCTAssertEqual(try run.nextLine(), "writerClosed      \(path("marker"))")
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
        XCTAssertEqual(run.remainingOutput(), "")
    }

    func testEveryKindAsJSON() throws {
        let run = try Run(Self.binary, ["--json", directory.path])
        try run.waitUntilEstablished()
        let outside = FileManager.default.temporaryDirectory.appendingPathComponent(
            "dirwatch-outside-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outside) }

        touch(path("a"))
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": path("a"), "isDirectory": false])
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path("a")))
        handle.write(Data("hello".utf8))
        try handle.close()
        XCTAssertEqual(try run.nextJSON(), ["kind": "modified", "path": path("a"), "isDirectory": false])
        XCTAssertEqual(rename(path("a"), path("b")), 0)
        XCTAssertEqual(
            try run.nextJSON(), ["kind": "renamed", "path": path("b"), "oldPath": path("a"), "isDirectory": false])
        XCTAssertEqual(rename(path("b"), outside.appendingPathComponent("b").path), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "movedOut", "path": path("b"), "isDirectory": false])
        XCTAssertEqual(rename(outside.appendingPathComponent("b").path, path("c")), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "movedIn", "path": path("c"), "isDirectory": false])
        XCTAssertEqual(chmod(path("c"), 0o600), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "attributesChanged", "path": path("c"), "isDirectory": false])
        XCTAssertEqual(unlink(path("c")), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "removed", "path": path("c"), "isDirectory": false])
        XCTAssertEqual(mkdir(path("sub"), 0o755), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": path("sub"), "isDirectory": true])
        XCTAssertEqual(rmdir(path("sub")), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "removed", "path": path("sub"), "isDirectory": true])

        XCTAssertEqual(rmdir(directory.path), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "rootRemoved", "path": directory.path, "isDirectory": true])
        XCTAssertEqual(try run.waitForExit(), 3)
        XCTAssertEqual(run.remainingOutput(), "", "no extra lines")
    }

    /// A slow writer, as a script sees it: a 64 KiB chunk appended every 150 ms for most of a
    /// second (on a timer), under `dirwatch --settle 0.3 --json`. No line while it writes; one
    /// line, the file created, no sooner than the quiet period after it is closed. (How soon
    /// after that is a latency, measured by the benchmark's settled rows, not asserted here: a
    /// busy machine may take longer, and a test that fails there says nothing of the library.)
    func testSettleWaitsUntilAFileBeingWrittenIsClosed() throws {
        let run = try Run(Self.binary, ["--settle", "0.3", "--json", directory.path])
        try run.waitUntilEstablished()
        let file = path("upload.bin")
        let fd = open(file, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let chunk = [UInt8](repeating: 0x5A, count: 64 * 1024)
        let linesWhileWriting = LockedCount()
        let closedAt = LockedCount()
        let done = expectation(description: "the writer closed the file")
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "writer"))
        var chunks = 0
        timer.setEventHandler {
            linesWhileWriting.add(run.waitingLines)
            guard chunks == 5 else {
                chunks += 1
                _ = write(fd, chunk, chunk.count)
                return
            }
            // Read before the close: the quiet period starts after it, however late this thread runs.
            closedAt.add(Int(DispatchTime.now().uptimeNanoseconds))
            close(fd)
            timer.cancel()
            done.fulfill()
        }
        timer.schedule(deadline: .now(), repeating: .milliseconds(150))
        timer.resume()
        wait(for: [done], timeout: 20)
        XCTAssertEqual(linesWhileWriting.value, 0, "no line while it writes")

        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": file, "isDirectory": false])
        let after = Double(Int(run.lastArrival) - closedAt.value) / 1e9
        XCTAssertGreaterThanOrEqual(after, 0.29, "not before the quiet period")
        // Nothing else came with it: the next line is the next change.
        touch(path("marker"))
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": path("marker"), "isDirectory": false])
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    /// `--compare-content`: a rewrite of the same bytes prints nothing; other bytes of the same
    /// size, with the file's times set back, print one `modified`. A file's first write since
    /// dirwatch started is printed: nothing says what it held before.
    func testCompareContentPrintsNothingForARewriteOfTheSameBytes() throws {
        let file = path("out.txt")
        append("v1", to: file)
        let run = try Run(
            Self.binary,
            ["--settle", "0.05", "--compare-content", "--json", "-E", "created,modified", directory.path])
        try run.waitUntilEstablished()
        func rewrite(_ text: String) {
            let fd = open(file, O_WRONLY | O_TRUNC)
            XCTAssertGreaterThanOrEqual(fd, 0)
            XCTAssertEqual(write(fd, text, text.utf8.count), text.utf8.count)
            close(fd)
        }
        let modified: NSDictionary = ["kind": "modified", "path": file, "isDirectory": false]
        rewrite("v1")
        XCTAssertEqual(try run.nextJSON(), modified, "the first write seen")
        rewrite("v1")
        touch(path("marker"))
        XCTAssertEqual(
            try run.nextJSON(), ["kind": "created", "path": path("marker"), "isDirectory": false],
            "nothing for the same bytes")

        var before = stat()
        XCTAssertEqual(stat(file, &before), 0)
        rewrite("v2")
        var times = [before.st_atim, before.st_mtim]
        XCTAssertEqual(utimensat(AT_FDCWD, file, &times, 0), 0)
        var after = stat()
        XCTAssertEqual(stat(file, &after), 0)
        XCTAssertEqual(after.st_size, before.st_size)
        XCTAssertEqual(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec)
        XCTAssertEqual(try run.nextJSON(), modified, "other bytes, of the same size and time")
        touch(path("marker 2"))
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": path("marker 2"), "isDirectory": false])
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    func testCompareContentGoesWithSettle() throws {
        let run = try Run(Self.binary, ["--compare-content", directory.path])
        XCTAssertEqual(try run.waitForExit(), 2)
        XCTAssertTrue(run.errorOutput().contains("--compare-content goes with --settle"), run.errorOutput())
    }

    func testExitsWhenTheLastOfSeveralRootsIsGone() throws {
        let second = directory.appendingPathComponent("second").path
        let first = directory.appendingPathComponent("first").path
        XCTAssertEqual(mkdir(first, 0o755), 0)
        XCTAssertEqual(mkdir(second, 0o755), 0)
        let run = try Run(Self.binary, ["--json", first, second, first])
        try run.waitUntilEstablished()
        XCTAssertEqual(rmdir(first), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "rootRemoved", "path": first, "isDirectory": true])
        touch(second + "/still-watched")
        XCTAssertEqual(try run.nextJSON()["path"] as? String, second + "/still-watched", "one root left: still running")
        XCTAssertEqual(rename(second, directory.appendingPathComponent("elsewhere").path), 0)
        XCTAssertEqual(try run.nextJSON(), ["kind": "rootMoved", "path": second, "isDirectory": true])
        XCTAssertEqual(try run.waitForExit(), 3)
        XCTAssertEqual(run.remainingOutput(), "", "the root named twice was watched once")
    }

    func testOddNamesAreValidJSONAndReversible() throws {
        let run = try Run(Self.binary, ["--json", directory.path])
        try run.waitUntilEstablished()
        let names = ["with space", "new\nline", "quote\"d", "back\\slash", "\u{1B}[2Jescape", "tab\t"]
        for name in names {
            touch(path(name))
            XCTAssertEqual(try run.nextJSON()["path"] as? String, path(name))
        }
        let raw: [UInt8] = Array(directory.path.utf8) + Array("/bytes-".utf8) + [0xFF, 0x80]
        let fd = open(raw.map { CChar(bitPattern: $0) } + [0], O_CREAT | O_WRONLY, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        let object = try run.nextJSON()
        XCTAssertEqual(Data(base64Encoded: try XCTUnwrap(object["pathBytes"] as? String)).map(Array.init), raw)
        run.terminate()
        XCTAssertEqual(try run.waitForExit(), 0, "SIGTERM ends dirwatch cleanly")
    }

    /// A real file whose name holds a right-to-left override and ` -> `, then renamed to a name
    /// ending in ` ->`: text and JSON, side by side, show neither raw.
    func testHostileNamesComeOutEscapedInBothFormats() throws {
        let text = try Run(Self.binary, [directory.path])
        let json = try Run(Self.binary, ["--json", directory.path])
        try text.waitUntilEstablished()
        try json.waitUntilEstablished()
        let name = "invoice\u{202E}fdp.exe -> x"
        touch(path(name))
        XCTAssertEqual(try text.nextLine(), #"created           \#(path("invoice"))\u{202E}fdp.exe -\u{3E} x"#)
        let created = try json.nextLine()
        XCTAssertTrue(created.contains(#"invoice\u202Efdp.exe -> x""#), created)
        XCTAssertFalse(created.unicodeScalars.contains("\u{202E}"), "no raw override: \(created)")
        let object = try JSONSerialization.jsonObject(with: Data(created.utf8)) as? [String: Any]
        XCTAssertEqual(object?["path"] as? String, path(name), "the same name once parsed")

        XCTAssertEqual(rename(path(name), path("y ->")), 0)
        let renamed = try text.nextLine()
        XCTAssertEqual(
            renamed, #"renamed           \#(path("invoice"))\u{202E}fdp.exe -\u{3E} x -> \#(path("y")) -\u{3E}"#)
        XCTAssertEqual(renamed.components(separatedBy: " -> ").count, 2, "one separator: \(renamed)")
        XCTAssertEqual(
            try json.nextJSON(), ["kind": "renamed", "path": path("y ->"), "oldPath": path(name), "isDirectory": false])
        for run in [text, json] {
            run.interrupt()
            XCTAssertEqual(try run.waitForExit(), 0)
            XCTAssertEqual(run.remainingOutput(), "")
        }
    }

    func testEverySIGTERMAndSIGINTEndsDirwatch() throws {
        // Twenty starts, each ended by a signal once it has reported a change: a signal that is
        // lost leaves dirwatch running (it did, now and then, with Dispatch's signal sources).
        for round in 0..<20 {
            let run = try Run(Self.binary, ["--json", directory.path])
            try run.waitUntilEstablished()
            touch(path("round-\(round)"))
            XCTAssertEqual(try run.nextJSON()["path"] as? String, path("round-\(round)"))
            if round.isMultiple(of: 2) { run.terminate() } else { run.interrupt() }
            let status = try run.waitForExit()
            // Under ThreadSanitizer a report turns the status into 66: show it.
            XCTAssertEqual(status, 0, "round \(round): \(status == 0 ? "" : run.errorOutput())")
        }
    }

    func testPollReportsChangesAndSaysItPolls() throws {
        let run = try Run(Self.binary, ["--poll", "0.05", directory.path])
        try run.waitUntilEstablished()
        XCTAssertTrue(
            run.errorsSoFar().contains("dirwatch: polling \(directory.path) every 0.05 s: polling was asked for"),
            run.errorsSoFar())
        touch(path("polled"))
        XCTAssertEqual(try run.nextLine(), "created           \(path("polled"))")
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    /// `dirwatch /proc` used to print "Watches established." and then nothing, for ever.
    func testProcIsWarnedAbout() throws {
        let run = try Run(Self.binary, ["/proc"])
        try run.waitUntilEstablished()
        XCTAssertTrue(
            run.errorsSoFar().contains(
                "dirwatch: warning: /proc is on proc, where the kernel's own changes raise no event"),
            run.errorsSoFar())
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    func testTextOutputAndExclude() throws {
        let run = try Run(Self.binary, ["--exclude", "*.swp", directory.path])
        try run.waitUntilEstablished()
        touch(path(".doc.swp"))
        touch(path("doc"))
        XCTAssertEqual(try run.nextLine(), "created           \(path("doc"))", "the excluded file never shows")
        touch(path("line\nbreak"))
        XCTAssertEqual(try run.nextLine(), "created           \(path("line\\nbreak"))")
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0, "SIGINT ends dirwatch cleanly")
    }

    /// `-r` says which backend watches the tree and why: fanotify as root; with the capability
    /// dropped (setpriv takes CAP_SYS_ADMIN out of the bounding set, so the exec'd dirwatch has
    /// it not), inotify, with the reason, and changes are still reported.
    /// The watch limit reached part-way through a tree, for real but without touching the
    /// machine's `fs.inotify.max_user_watches`: dirwatch runs in a user namespace of its own whose
    /// limit is 100 (`/proc/sys/user/max_inotify_watches`, which the kernel checks beside the
    /// machine's). It names the limit, watches what it could, and goes on: one notice for the
    /// walk, with how many directories could not be watched (issue 26: one line per directory).
    func testTheWatchLimitOfItsOwnUserNamespaceIsNamedAndTheRestIsWatched() throws {
        let unshare = URL(fileURLWithPath: "/usr/bin/unshare")
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: unshare.path), "needs unshare(1)")
        for index in 0..<300 { XCTAssertEqual(mkdir(path("d\(index)"), 0o755), 0) }
        let script = #"echo 100 > /proc/sys/user/max_inotify_watches && exec "$0" "$@""#
        let run = try Run(
            unshare,
            [
                "--user", "--map-root-user", "/bin/sh", "-c", script, Self.binary.path, "-r", "--backend", "inotify",
                directory.path,
            ])
        try run.waitUntilEstablished()
        let notice = try run.nextLine()
        XCTAssertTrue(notice.hasPrefix("failed "), notice)
        XCTAssertTrue(notice.contains("fs.inotify.max_user_watches"), notice)
        XCTAssertTrue(notice.contains("this is not a full disk"), notice)
        // How many it could not watch, and the limit that stopped it, the namespace's.
        XCTAssertTrue(notice.contains(" others of this tree could not be watched; "), notice)
        XCTAssertTrue(notice.contains("; the limit is 100 watches for this user"), notice)
        // The root is among the directories watched: what is made there is reported, next.
        touch(path("f"))
        XCTAssertEqual(try run.nextLine(), "created           \(path("f"))")
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    func testRecursiveSaysItsBackendAndFallsBackToInotifyWithoutTheCapability() throws {
        let run = try Run(Self.binary, ["-r", directory.path])
        try run.waitUntilEstablished()
        XCTAssertTrue(run.errorsSoFar().contains("dirwatch: fanotify for \(directory.path): "), run.errorsSoFar())
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)

        let dropped = try Run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", Self.binary.path, "-r", directory.path])
        try dropped.waitUntilEstablished()
        let said = dropped.errorsSoFar()
        XCTAssertTrue(said.contains("dirwatch: inotify for \(directory.path): fanotify cannot be used: "), said)
        XCTAssertTrue(said.contains("CAP_SYS_ADMIN"), said)
        touch(path("f"))
        XCTAssertEqual(try dropped.nextLine(), "created           \(path("f"))")
        dropped.interrupt()
        XCTAssertEqual(try dropped.waitForExit(), 0)

        let forced = try Run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--bounding-set", "-sys_admin", Self.binary.path, "-r", "--backend", "fanotify", directory.path])
        XCTAssertNotEqual(try forced.waitForExit(), 0)
        XCTAssertTrue(forced.errorOutput().contains("CAP_SYS_ADMIN"), forced.errorOutput())
    }

    func testRecursiveReportsWhatIsMadeInNewDirectories() throws {
        XCTAssertEqual(mkdir(path("old"), 0o755), 0)
        let run = try Run(Self.binary, ["-r", "--json", directory.path])
        try run.waitUntilEstablished()
        touch(path("old/f"))
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": path("old/f"), "isDirectory": false])
        XCTAssertEqual(mkdir(path("new"), 0o755), 0)
        XCTAssertEqual(mkdir(path("new/deeper"), 0o755), 0)
        touch(path("new/deeper/g"))
        var created: Set<String> = []
        for _ in 0..<3 {
            let line = try run.nextJSON()
            XCTAssertEqual(line["kind"] as? String, "created")
            created.insert(try XCTUnwrap(line["path"] as? String))
        }
        XCTAssertEqual(created, [path("new"), path("new/deeper"), path("new/deeper/g")])
        XCTAssertEqual(rename(path("new"), path("renamed")), 0)
        XCTAssertEqual(
            try run.nextJSON(),
            ["kind": "renamed", "path": path("renamed"), "oldPath": path("new"), "isDirectory": true])
        touch(path("renamed/deeper/h"))
        XCTAssertEqual(
            try run.nextJSON(), ["kind": "created", "path": path("renamed/deeper/h"), "isDirectory": false])
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    /// `--gitignore`: what the repository's `.gitignore` lists is never printed, an ignored
    /// directory is not watched, and an edit of the file lets a directory in at once.
    func testGitignoreLeavesOutWhatGitIgnoresAndFollowsItsEdits() throws {
        for made in [".git", "build", "src"] { XCTAssertEqual(mkdir(path(made), 0o755), 0) }
        XCTAssertTrue(FileManager.default.createFile(atPath: path(".gitignore"), contents: Data("build/\n*.o\n".utf8)))
        let run = try Run(Self.binary, ["-r", "--gitignore", "--exclude", ".git", "--json", directory.path])
        try run.waitUntilEstablished()
        touch(path("build/out"))
        touch(path("src/main.o"))
        touch(path("src/main.c"))
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": path("src/main.c"), "isDirectory": false])
        XCTAssertTrue(FileManager.default.createFile(atPath: path(".gitignore"), contents: Data("*.o\n".utf8)))
        var lines: [NSDictionary] = []
        while !lines.contains(where: { $0["path"] as? String == path("build/out") }) {
            lines.append(try run.nextJSON())
        }
        let movedIn: NSDictionary = ["kind": "movedIn", "path": path("build"), "isDirectory": true]
        let created: NSDictionary = ["kind": "created", "path": path("build/out"), "isDirectory": false]
        XCTAssertTrue(lines.contains(movedIn), "\(lines)")
        XCTAssertTrue(lines.contains(created), "\(lines)")
        touch(path("build/later"))
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": path("build/later"), "isDirectory": false])
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    /// The issue's test, through the command: a generated repository with nested `.gitignore`
    /// files under `dirwatch -r --gitignore`. No kernel watch of the dirwatch process (its
    /// `/proc/PID/fdinfo`) is on a directory git ignores, every other directory has one, and of a
    /// file and a directory with a file made in every directory, what is printed is exactly what
    /// `git check-ignore` does not ignore.
    func testGitignoreOnAGeneratedTreePrintsExactlyWhatGitDoesNotIgnore() throws {
        guard let git = installedProgram("git") else { throw XCTSkip("git is not installed") }
        for seed: UInt64 in [1, 2, 3] {
            try generatedGitignoreRound(git: git, seed: seed)
            try FileManager.default.removeItem(at: directory)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
    }

    /// One seeded tree of ``testGitignoreOnAGeneratedTreePrintsExactlyWhatGitDoesNotIgnore()``.
    private func generatedGitignoreRound(git: String, seed: UInt64) throws {
        let environment = ["HOME": directory.path, "GIT_CONFIG_NOSYSTEM": "1", "XDG_CONFIG_HOME": directory.path]
        XCTAssertEqual(try runChild(git, ["init", "-q", directory.path], environment: environment).status, 0)
        var random = Seeded(seed)
        let names = ["src", "build", "logs", "cache", "lib", "d1", "d2", "gen"]
        let patterns = [
            "build/", "**/logs", "*.log", "!keep.log", "d*/", "!d1/", "/cache", "gen/**", "lib/gen", "*.tmp",
        ]
        var directories = [""]
        var next = 0
        while next < directories.count {
            let parent = directories[next]
            next += 1
            guard parent.split(separator: "/").count < 2 else { continue }
            for name in names.shuffled(using: &random).prefix(3) {
                let made = parent.isEmpty ? name : parent + "/" + name
                XCTAssertEqual(mkdir(path(made), 0o755), 0)
                directories.append(made)
            }
        }
        for parent in directories where Bool.random(using: &random) {
            let lines = patterns.shuffled(using: &random).prefix(Int.random(in: 1...3, using: &random))
            let file = parent.isEmpty ? ".gitignore" : parent + "/.gitignore"
            XCTAssertTrue(
                FileManager.default.createFile(
                    atPath: path(file), contents: Data((lines.joined(separator: "\n") + "\n").utf8)))
        }
        func ignored(_ paths: [String]) throws -> Set<String> {
            let result = try runChild(
                git, ["-C", directory.path, "check-ignore", "--no-index", "--"] + paths, environment: environment)
            return Set(result.output.split(separator: "\n").map(String.init))
        }
        let ignoredDirectories = try ignored(directories.filter { !$0.isEmpty })
        let run = try Run(
            Self.binary, ["-r", "--gitignore", "--exclude", ".git", "--json", directory.path], environment: environment)
        try run.waitUntilEstablished()
        let watchedInodes = try kernelWatchedInodes(of: run.pid)
        for made in directories where !made.isEmpty {
            var status = stat()
            XCTAssertEqual(stat(path(made), &status), 0)
            XCTAssertEqual(
                watchedInodes.contains(UInt64(status.st_ino)), !ignoredDirectories.contains(made),
                "seed \(seed), \(made): \(directories)")
        }
        var madeNow: [String] = []
        for parent in directories {
            let prefix = parent.isEmpty ? "" : parent + "/"
            for name in ["new.txt", "new.log", "x.tmp"] {
                touch(path(prefix + name))
                madeNow.append(prefix + name)
            }
            XCTAssertEqual(mkdir(path(prefix + "fresh"), 0o755), 0)
            touch(path(prefix + "fresh/inside.txt"))
            madeNow += [prefix + "fresh", prefix + "fresh/inside.txt"]
        }
        // Last, and never ignored: once it is printed, everything before it is.
        touch(path("sentinel-end.txt"))
        var printed: Set<String> = []
        while true {
            let line = try run.nextJSON()
            let printedPath = try XCTUnwrap(line["path"] as? String)
            if printedPath == path("sentinel-end.txt") { break }
            XCTAssertEqual(line["kind"] as? String, "created", "\(line)")
            printed.insert(printedPath)
        }
        let expected = Set(madeNow).subtracting(try ignored(madeNow)).map(path)
        XCTAssertEqual(printed, Set(expected), "seed \(seed): \(directories)")
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    /// A generator of repeatable draws (SplitMix64).
    private struct Seeded: RandomNumberGenerator {
        var state: UInt64
        init(_ seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// The inodes of every inotify watch of process `pid`, from its `/proc/PID/fdinfo`.
    private func kernelWatchedInodes(of pid: Int32) throws -> Set<UInt64> {
        var inodes: Set<UInt64> = []
        for fd in try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fdinfo") {
            let info = (try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8)) ?? ""
            for line in info.split(separator: "\n") where line.hasPrefix("inotify wd:") {
                if let field = line.split(separator: " ").first(where: { $0.hasPrefix("ino:") }),
                    let inode = UInt64(field.dropFirst(4), radix: 16)
                {
                    inodes.insert(inode)
                }
            }
        }
        return inodes
    }

    func testOnceExitsAfterTheFirstBatch() throws {
        let run = try Run(Self.binary, ["--once", "--json", directory.path])
        try run.waitUntilEstablished()
        touch(path("first"))
        XCTAssertEqual(try run.nextJSON()["path"] as? String, path("first"))
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    func testExecGetsTheBatchOnStdinAndInTheEnvironment() throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("dirwatch-exec-\(UUID().uuidString)")
        defer { for suffix in [".stdin", ".env"] { unlink(out.path + suffix) } }
        let script = "cat > \"$1.stdin\"; printf '%s' \"$DIRWATCH_PATHS\" > \"$1.env\"; exit 7"
        let run = try Run(Self.binary, ["--once", directory.path, "--exec", "/bin/sh", "-c", script, "sh", out.path])
        try run.waitUntilEstablished()
        touch(path("built"))
        XCTAssertEqual(try run.waitForExit(), 7, "--once with --exec exits with the command's status")
        let stdin = try String(contentsOfFile: out.path + ".stdin", encoding: .utf8)
        let object =
            try JSONSerialization.jsonObject(with: Data(stdin.split(separator: "\n")[0].utf8)) as? [String: Any]
        XCTAssertEqual(object?["path"] as? String, path("built"))
        XCTAssertEqual(try String(contentsOfFile: out.path + ".env", encoding: .utf8), path("built"))
        XCTAssertEqual(run.remainingOutput(), "", "with --exec, changes go to the command, not to stdout")
    }

    func testRestartStopsTheRunningCommand() throws {
        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("dirwatch-fifo-\(UUID().uuidString)")
            .path
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        defer { unlink(fifo) }
        let reader = open(fifo, O_RDWR)  // read-write: opening never blocks, and writers never see EOF
        defer { close(reader) }
        // Each run says its pid, then waits forever (until dirwatch stops it).
        let script = "echo $$ > \"$1\"; exec tail -f /dev/null"
        let run = try Run(Self.binary, [directory.path, "--restart", "--exec", "/bin/sh", "-c", script, "sh", fifo])
        try run.waitUntilEstablished()
        let first = try XCTUnwrap(pid_t(readLine(reader)), "the run at start")
        XCTAssertEqual(kill(first, 0), 0, "the first run is going")
        touch(path("one"))
        let second = try XCTUnwrap(pid_t(readLine(reader)))
        XCTAssertNotEqual(first, second)
        XCTAssertEqual(kill(first, 0), -1, "the first run was stopped before the second started")
        run.terminate()
        XCTAssertEqual(try run.waitForExit(), 0)
        XCTAssertEqual(kill(second, 0), -1, "stopping dirwatch stops its command")
    }

    func testBadPathsFailWithOneLine() throws {
        // A regular file is watched (see testARegularFileAsPathIsWatchedAsAFile); other
        // non-directories are not.
        let fifo = path("fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let cases: [([String], Int32, String)] = [
            ([path("missing")], 1, "dirwatch: cannot watch \"\(path("missing"))\": no such file or directory"),
            ([fifo], 1, "dirwatch: cannot watch \"\(fifo)\": not a directory"),
            (
                ["--file", path("missing/app.conf")], 1,
                "dirwatch: cannot watch \"\(path("missing/app.conf"))\": no such file or directory "
                    + "(the file need not exist; its directory must)"
            ),
            (["--file", ""], 2, "dirwatch: --file needs a non-empty path (see dirwatch --help)"),
            ([directory.path, "-E", "create,bogus"], 2, "dirwatch: -E: unknown kind 'bogus'; valid: created,"),
            ([""], 2, "dirwatch: an empty path is not a directory; use . for the current one (see dirwatch --help)"),
            (
                [directory.path, "--exec", "no-such-command-xyz"], 2,
                "dirwatch: --exec: command not found: 'no-such-command-xyz'"
            ),
        ]
        for (arguments, status, message) in cases {
            let run = try Run(Self.binary, arguments)
            XCTAssertEqual(try run.waitForExit(), status, "\(arguments)")
            let errors = run.errorOutput()
            XCTAssertTrue(errors.hasPrefix(message), "\(arguments): \(errors)")
            XCTAssertEqual(errors.filter { $0 == "\n" }.count, 1, "one line: \(errors)")
        }
    }

    /// Out of descriptors (`ulimit -n`): the message names the process's limit and how to raise
    /// it, not inotify's instance limit. (Four: what the dynamic loader needs to start dirwatch,
    /// and one descriptor short of what its event loop opens.)
    func testDescriptorLimitIsNamedAsSuch() throws {
        let run = try Run(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", #"ulimit -n 4 && exec "$0" "$@""#, Self.binary.path, directory.path])
        XCTAssertEqual(try run.waitForExit(), 1)
        let errors = run.errorOutput()
        XCTAssertTrue(
            errors.hasPrefix(
                "dirwatch: cannot watch \"\(directory.path)\": this process's limit on open descriptors is reached "
                    + "(RLIMIT_NOFILE, `ulimit -n`); close some or raise the limit: `ulimit -n 65536` in the shell"),
            errors)
        XCTAssertTrue(errors.contains("LimitNOFILE="), errors)
        XCTAssertFalse(errors.contains("max_user_instances"), errors)
    }

    /// A directory deeper than PATH_MAX, watched from inside: `cd` there a level at a time (no
    /// one path reaches it), then `dirwatch .`. Its changes carry their whole path.
    func testWatchesADirectoryDeeperThanPathMaxFromInside() throws {
        var levels = [open(directory.path, O_RDONLY | O_DIRECTORY)]
        var names: [String] = []
        defer {
            unlinkat(levels.last!, "made", 0)
            for (level, name) in zip(levels.dropLast(), names).reversed() { unlinkat(level, name, AT_REMOVEDIR) }
            for fd in levels { close(fd) }
        }
        for level in 0..<20 {
            let name = "level-\(level)-" + String(repeating: "d", count: 240)
            XCTAssertEqual(mkdirat(levels.last!, name, 0o755), 0)
            levels.append(openat(levels.last!, name, O_RDONLY | O_DIRECTORY))
            names.append(name)
        }
        let deep = ([directory.path] + names).joined(separator: "/")
        XCTAssertGreaterThan(deep.utf8.count, Int(PATH_MAX))
        // -P: dash's logical cd would chdir to the whole path, which is too long.
        let script = #"cd -P "$1" && "# + names.map { "cd -P \($0) && " }.joined() + #"exec "$0" --json ."#
        let run = try Run(URL(fileURLWithPath: "/bin/sh"), ["-c", script, Self.binary.path, directory.path])
        try run.waitUntilEstablished()
        let file = openat(levels.last!, "made", O_CREAT | O_WRONLY, 0o644)
        XCTAssertGreaterThanOrEqual(file, 0)
        close(file)
        XCTAssertEqual(try run.nextJSON(), ["kind": "created", "path": deep + "/made", "isDirectory": false])
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }

    private func readLine(_ fd: Int32) -> String {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 && byte != UInt8(ascii: "\n") { line.append(byte) }
        return String(decoding: line, as: UTF8.self)
    }
}
