// monitor-group: several folders watched as one group of monitors, as XestiMonitors' apps kept
// an array of monitors: started together (all or none), paused and resumed together, stopped
// together. Type a command and Enter:
//
//     p  pause every watcher (no output; the changes are kept track of)
//     r  resume: what changed while paused comes now, one batch per folder
//     s  stop (no kernel watches; what changes meanwhile is not reported)
//     g  go: start again
//     q  quit (also Ctrl-D)
//
//     swift run monitor-group Inbox Outbox

import DirectoryWatcher
import Dispatch
import Glibc

func printError(_ message: String) {
    var bytes = Array(message.utf8)
    _ = write(STDERR_FILENO, &bytes, bytes.count)
}

/// One line to stdout, written at once. (Not print and fflush: fflush(NULL) locks every stream,
/// stdin too, which the reading thread holds while it waits for a line.)
func say(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    _ = write(STDOUT_FILENO, &bytes, bytes.count)
}

let paths = Array(CommandLine.arguments.dropFirst())
if paths.isEmpty || paths.contains("-h") || paths.contains("--help") {
    say("usage: monitor-group DIRECTORY...")
    exit(paths.isEmpty ? 2 : 0)
}

// One watcher per folder, made now and started by the group. Output goes through the main
// queue, so lines from different folders never interleave.
var watchers: [DirectoryWatcher] = []
do {
    for path in paths {
        watchers.append(
            try DirectoryWatcher(path: path, queue: .main) { changes in
                for change in changes {
                    say(change.whilePaused ? "\(change)" : "\(change.kind.rawValue) \(change.path)")
                }
            })
    }
} catch {
    printError("monitor-group: \(error)\n")
    exit(2)
}
let group = MonitorGroup(watchers)

@MainActor func start() {
    do {
        try group.startMonitoring()
        say("watching \(paths.count) folder\(paths.count == 1 ? "" : "s")")
    } catch {
        // The group stopped the watchers it had started: none is left watching.
        printError("monitor-group: \(error); none of the folders is watched\n")
    }
}

start()
if !group.isMonitoring { exit(1) }

// Commands are read on a worker of their own (readLine blocks): the main queue prints the changes.
DispatchQueue.global().async {
    while let line = readLine() {
        let command = line.split(separator: " ").first.map(String.init) ?? ""
        DispatchQueue.main.async {
            switch command {
            case "p": say(watchers.map { $0.pause() }.contains(true) ? "paused" : "not watching")
            case "r": say(watchers.map { $0.resume() }.contains(true) ? "resumed" : "not paused")
            case "s": say(group.stopMonitoring() ? "stopped" : "not watching")
            case "g": start()
            case "q": exit(0)
            case "": break
            default: say("commands: p (pause), r (resume), s (stop), g (go), q (quit)")
            }
        }
    }
    DispatchQueue.main.async { exit(0) }
}
dispatchMain()
