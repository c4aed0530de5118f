import Glibc

/// Another watcher, run as a process that prints a line for each file created.
struct Peer {
    let name: String
    /// argv for watching `directory` (recursively when asked, if the peer can).
    let command: (_ directory: String, _ recursive: Bool) -> [String]
    /// Printed once the watches are in place.
    let readyMarker: String
    /// In each line that reports a created file.
    let createdMarker: String
    let recursive: Bool
    /// Merge stderr into stdout (tools that announce readiness on stderr).
    var mergeStandardError = false
}

/// `--peers`: other watchers timed as processes under the same load, in the same run as the
/// floor, so their figures can be given as ratios to it. Peers that are not installed are
/// skipped, with one line saying so.
///
/// Each peer runs with the settings its own documentation uses by default. Its CPU is what
/// `wait4` reports minus what the same peer costs when it starts, watches an empty directory and
/// stops (an interpreter's start-up is not a per-change cost). Setup times likewise subtract the
/// peer's time to become ready over an empty directory.
struct Peers {
    let bench: Bench

    private var configuration: Configuration { bench.configuration }
    /// As many rounds as the library's: a peer's median is compared with the library's, and
    /// three rounds on a shared machine left it at the mercy of one noisy round.
    private var rounds: Int { configuration.rounds }
    private let mask = "create,delete,modify,attrib,moved_from,moved_to,delete_self,move_self"

    /// The peers' names, and one note per peer that was skipped.
    func run() throws(BenchError) -> ([String], [String]) {
        var names: [String] = []
        var notes: [String] = []
        for (peer, missing) in candidates() {
            if let missing {
                let note = "\(peer.name) skipped: \(missing)."
                bench.log(note)
                notes.append(note)
                continue
            }
            bench.log("peer \(peer.name)")
            try measure(peer)
            names.append(peer.name)
        }
        return (names, notes)
    }

    // MARK: - The peers

    private func candidates() -> [(Peer, String?)] {
        var list: [(Peer, String?)] = []
        // This package's own command, built next to the bench (swift build -c release).
        let dirwatch =
            bench.executable.split(separator: "/", omittingEmptySubsequences: false).dropLast()
            .joined(separator: "/") + "/dirwatch"
        /// This package's command at `path`, on inotify as the library's rows are (`-r` alone would
        /// pick fanotify as root).
        func dirwatchPeer(_ name: String, at path: String) -> Peer {
            Peer(
                name: name,
                command: { directory, recursive in
                    [path, "--json"] + (recursive ? ["-r", "--backend", "inotify"] : []) + [directory]
                },
                readyMarker: "Watches established", createdMarker: "\"created\"", recursive: true,
                mergeStandardError: true)
        }
        list.append(
            (
                dirwatchPeer("dirwatch --json", at: dirwatch),
                access(dirwatch, X_OK) == 0
                    ? nil : "dirwatch not built next to the bench (swift build -c release --product dirwatch)"
            ))
        // The same command linked with --static-swift-stdlib, as the README says to build it for
        // use: what a user runs costs what this peer costs.
        if let statically = configuration.staticDirwatch {
            list.append(
                (
                    dirwatchPeer("dirwatch --json, static", at: statically),
                    access(statically, X_OK) == 0 ? nil : "\(statically) is not an executable"
                ))
        }
        let inotifywait = Peer(
            name: "inotifywait",
            command: { [mask] directory, recursive in
                ["inotifywait", "-m"] + (recursive ? ["-r"] : []) + ["-e", mask, directory]
            },
            readyMarker: "Watches established", createdMarker: "CREATE", recursive: true, mergeStandardError: true)
        list.append(
            (
                inotifywait,
                runs(["inotifywait", "--help"], acceptingExitCodes: [0, 1])
                    ? nil : "inotifywait not found (Debian: inotify-tools)"
            ))
        let watchfiles = Peer(
            name: "watchfiles",
            command: { directory, recursive in
                ["python3", "-c", Self.watchfilesScript, directory, recursive ? "1" : "0"]
            },
            readyMarker: "ready", createdMarker: "created", recursive: true)
        list.append(
            (watchfiles, runs(["python3", "-c", "import watchfiles"]) ? nil : "Python module watchfiles not found"))
        let watchdog = Peer(
            name: "watchdog",
            command: { directory, recursive in ["python3", "-c", Self.watchdogScript, directory, recursive ? "1" : "0"]
            },
            readyMarker: "ready", createdMarker: "created", recursive: true)
        list.append((watchdog, runs(["python3", "-c", "import watchdog"]) ? nil : "Python module watchdog not found"))
        let (fsnotifyBinary, fsnotifyMissing) = buildFsnotify()
        let fsnotify = Peer(
            name: "fsnotify (Go)",
            command: { directory, _ in [fsnotifyBinary, directory] },
            readyMarker: "ready", createdMarker: "created", recursive: false)
        list.append((fsnotify, fsnotifyMissing))
        return list
    }

    /// watchfiles' `watch()` loop with its defaults (debounce 1,600 ms, step 50 ms), on the
    /// RustNotify object that `watch()` itself makes, so the script can say when it is ready.
    static let watchfilesScript = """
        import sys
        from watchfiles._rust_notify import RustNotify
        with RustNotify([sys.argv[1]], False, False, 300, sys.argv[2] == "1", False) as notify:
            print("ready", flush=True)
            while True:
                changes = notify.watch(1600, 50, 5000, None)
                if changes in ("signal", "stop"):
                    break
                if changes != "timeout":
                    sys.stdout.write("".join("created %s\\n" % path for change, path in changes if change == 1))
                    sys.stdout.flush()
        """

    /// watchdog's Observer (inotify) with a handler that prints each creation.
    static let watchdogScript = """
        import sys, time
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
        class Handler(FileSystemEventHandler):
            def on_created(self, event):
                sys.stdout.write("created %s\\n" % event.src_path)
                sys.stdout.flush()
        observer = Observer()
        observer.schedule(Handler(), sys.argv[1], recursive=sys.argv[2] == "1")
        observer.start()  # adds the watches before it returns
        print("ready", flush=True)
        while True:
            time.sleep(3600)
        """

    /// fsnotify's own example loop; flushes its output when the event channel is empty.
    static let fsnotifySource = """
        package main

        import (
        \t"bufio"
        \t"fmt"
        \t"os"

        \t"github.com/fsnotify/fsnotify"
        )

        func main() {
        \twatcher, err := fsnotify.NewWatcher()
        \tif err != nil {
        \t\tfmt.Fprintln(os.Stderr, err)
        \t\tos.Exit(1)
        \t}
        \tif err := watcher.Add(os.Args[1]); err != nil {
        \t\tfmt.Fprintln(os.Stderr, err)
        \t\tos.Exit(1)
        \t}
        \tout := bufio.NewWriter(os.Stdout)
        \tfmt.Println("ready")
        \tfor {
        \t\tselect {
        \t\tcase event := <-watcher.Events:
        \t\t\tif event.Op&fsnotify.Create != 0 {
        \t\t\t\tout.WriteString("created " + event.Name + "\\n")
        \t\t\t}
        \t\t\tif len(watcher.Events) == 0 {
        \t\t\t\tout.Flush()
        \t\t\t}
        \t\tcase err := <-watcher.Errors:
        \t\t\tfmt.Fprintln(os.Stderr, err)
        \t\t}
        \t}
        }
        """

    /// Builds the fsnotify peer offline, from the Go sources Debian installs
    /// (golang-go, golang-github-fsnotify-fsnotify-dev). The binary, or why there is none.
    private func buildFsnotify() -> (String, String?) {
        let directory = "\(bench.scratch)/fsnotify-peer"
        let binary = "\(directory)/fsnotify-peer"
        let missing = "Go or fsnotify's sources not found (Debian: golang-go, golang-github-fsnotify-fsnotify-dev)"
        guard (try? Files.makeDirectory(directory)) != nil,
            (try? Files.write(Self.fsnotifySource, to: "\(directory)/main.go")) != nil
        else { return (binary, missing) }
        // GOPATH mode on the directory where Debian's golang-*-dev packages put their sources; the
        // build cache in the scratch directory, which goes when the run ends.
        let path = getenv("PATH").map { String(cString: $0) } ?? ""
        let environment = [
            "PATH=\(path)", "HOME=\(directory)", "GO111MODULE=off", "GOPATH=/usr/share/gocode",
            "GOCACHE=\(directory)/cache", "GOFLAGS=",
        ]
        let built = runs(["go", "build", "-o", binary, "\(directory)/main.go"], environment: environment)
        return (binary, built ? nil : missing)
    }

    /// Whether `arguments` runs and exits with one of `acceptingExitCodes`.
    private func runs(_ arguments: [String], acceptingExitCodes: [Int32] = [0], environment: [String]? = nil) -> Bool {
        guard
            let process = try? ChildProcess(
                name: arguments[0], executable: arguments[0], arguments: arguments, mergeStandardError: true,
                environment: environment)
        else { return false }
        while process.readLine() != nil {}
        guard let status = try? process.exitStatus() else { return false }
        return acceptingExitCodes.contains(status)
    }

    // MARK: - Measuring one peer

    private func start(_ peer: Peer, watching directory: String, recursive: Bool = false) throws(BenchError)
        -> ChildProcess
    {
        let arguments = peer.command(directory, recursive)
        let process = try ChildProcess(
            name: peer.name, executable: arguments[0], arguments: arguments,
            mergeStandardError: peer.mergeStandardError)
        _ = try process.expectLine(containing: peer.readyMarker)
        return process
    }

    private func measure(_ peer: Peer) throws(BenchError) {
        let c = configuration
        var cpu: [Double] = []
        var lost: [Double] = []
        var idle: [Double] = []
        var resident: [Double] = []
        var setup: [Int: [Double]] = [:]
        Files.dropCachedPages(ofCommand: peer.command("/", false)[0])
        for round in 0..<rounds {
            let empty = "\(bench.scratch)/peer-empty"
            try Files.makeDirectory(empty)
            defer { Files.remove(empty) }
            // What the peer costs with nothing to do: start, become ready, stop.
            let started = monotonicNanoseconds()
            let idleProcess = try start(peer, watching: empty)
            let startUp = Double(monotonicNanoseconds() - started)
            for index in 0..<10 { try Files.createFile("\(empty)/\(index)") }
            sleep(seconds: c.idleSettle)
            let before = ContextSwitches(pid: idleProcess.pid)
            sleep(seconds: c.idleWindow)
            idle.append(Double(ContextSwitches(pid: idleProcess.pid).wakeUps(since: before)) / c.idleWindow)
            _ = try idleProcess.terminate()
            let baseline = try start(peer, watching: empty)
            let baselineCPU = Double(cpuNanoseconds(try baseline.terminate()))

            bench.log("peer \(peer.name): round \(round + 1)/\(rounds): burst")
            let directory = "\(bench.scratch)/peer-burst-\(round)"
            try Files.makeDirectory(directory)
            defer { Files.remove(directory) }
            let process = try start(peer, watching: directory)
            let counter = process.countLines(containing: peer.createdMarker)
            try Files.createFiles(in: directory, prefix: "f", count: c.burstSize)
            let received = counter.wait(for: c.burstSize, stall: 3)
            resident.append(Double(residentKiB(String(process.pid))) / 1024)
            let usage = try process.terminate()
            cpu.append((Double(cpuNanoseconds(usage)) - baselineCPU) / Double(c.burstSize) / 1000)
            lost.append(Double(c.burstSize - received))

            guard peer.recursive else { continue }
            for (size, root) in bench.treeRoots.sorted(by: { $0.key < $1.key }) {
                bench.log(
                    "peer \(peer.name): round \(round + 1)/\(rounds): recursive setup over \(format(Double(size)))")
                let started = monotonicNanoseconds()
                let process = try start(peer, watching: root, recursive: true)
                setup[size, default: []].append((Double(monotonicNanoseconds() - started) - startUp) / 1e6)
                _ = try process.terminate()
            }
        }
        for index in bench.figures.indices {
            let figure = bench.figures[index]
            let measured: Measured?
            switch figure.key {
            case "cpu": measured = .values(cpu)
            case "lost": measured = .values(lost)
            case "idle": measured = .values(idle)
            case "burst-resident": measured = .values(resident)
            case let key where key.hasPrefix("tree-"):
                let size = Int(key.dropFirst("tree-".count)) ?? 0
                measured = peer.recursive ? .values(setup[size] ?? []) : .notAvailable("not recursive")
            default: measured = nil
            }
            if let measured { bench.figures[index].peers[peer.name] = measured }
        }
    }
}
