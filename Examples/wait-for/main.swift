// wait-for: block a shell script until a path appears (or, with --gone, until it is gone), with
// no polling loop: the async sequence of the path's directory says when.
//
//     swift run wait-for build/done.flag && ./deploy.sh
//     swift run wait-for --gone --timeout 30 /run/lock/backup.lock
//     swift run wait-for done.flag      # a bare name: in the current directory
//
// Exit status: 0 the condition holds, 1 the timeout passed or the directory cannot be watched,
// 2 usage error, 3 the directory itself was removed or moved.

import DirectoryWatcher
import Dispatch
import Glibc

func fail(_ message: String, status: Int32) -> Never {
    var bytes = Array("wait-for: \(message)\n".utf8)
    _ = write(STDERR_FILENO, &bytes, bytes.count)
    exit(status)
}

let usage = "usage: wait-for [--gone] [--timeout SECONDS] PATH"
var arguments = Array(CommandLine.arguments.dropFirst())
var waitsForAbsence = false
var timeout: Double?
var target: String?
while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    switch argument {
    case "-h", "--help":
        print(usage)
        exit(0)
    case "--gone":
        waitsForAbsence = true
    case "--timeout":
        guard let text = arguments.first, let seconds = Double(text), seconds > 0, seconds.isFinite else {
            fail("--timeout takes a number of seconds above 0 (\(usage))", status: 2)
        }
        arguments.removeFirst()
        timeout = seconds
    default:
        guard target == nil, !argument.isEmpty else { fail(usage, status: 2) }
        target = argument
    }
}
guard let target else { fail(usage, status: 2) }
let condition = (target: target, absent: waitsForAbsence)

/// Whether the condition holds now: the path names something (a link counts, dangling or not),
/// or, with --gone, it names nothing.
func conditionHolds() -> Bool {
    var status = stat()
    let exists = lstat(condition.target, &status) == 0
    return exists != condition.absent
}

// The directory that holds the path, watched for entries coming and going under any name: a
// rename onto the path counts as its creation. For a bare name, `parent` is ".", as dirname says.
let path = FileSystemPath(target)
let directory = path.parent
let changes: DirectoryChanges
do {
    changes = try DirectoryWatcher.changes(
        path: directory.description, options: .init(events: [.created, .removed, .moved]))
} catch {
    fail("\(error)", status: 1)
}
// Checked once the watch is in place, so a change between the check and the watch is not missed.
if conditionHolds() { exit(0) }
if let timeout {
    let message = "\(target) \(waitsForAbsence ? "still exists" : "did not appear") after \(timeout) s"
    DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { fail(message, status: 1) }
}
for await change in changes {
    switch change.kind {
    case .rootRemoved, .rootMoved:
        fail("\(directory) was \(change.kind == .rootRemoved ? "removed" : "moved")", status: 3)
    case .overflow:
        // Changes may have been lost: the path itself says whether the wait is over.
        if conditionHolds() { exit(0) }
    default:
        let names = [change.path] + (change.oldPath.map { [$0] } ?? [])
        if names.contains(where: { $0.lastComponent == path.lastComponent }), conditionHolds() { exit(0) }
    }
}
