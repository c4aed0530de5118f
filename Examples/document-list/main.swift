// document-list: what the seed apps did with Apple's DirectoryWatcher sample. Watch a folder,
// print its file list (files only, sorted) at start and again at once on every change.
//
//     swift run document-list [DIRECTORY]     (default: the current directory; Ctrl-C stops)

import DirectoryWatcher
import Dispatch
import Glibc

/// The names of the regular files in `directory` (following symbolic links), sorted by bytes.
func listFiles(in directory: FileSystemPath) -> [FileSystemPath] {
    guard let stream = directory.withCString({ opendir($0) }) else { return [] }
    defer { closedir(stream) }
    let directoryFD = dirfd(stream)
    var names: [FileSystemPath] = []
    while let entry = readdir(stream) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { FileSystemPath(bytes: $0) }
        if name.bytes == [0x2E] || name.bytes == [0x2E, 0x2E] { continue }
        var info = stat()
        let found = name.withCString { fstatat(directoryFD, $0, &info, 0) } == 0
        if found && (info.st_mode & S_IFMT) == S_IFREG { names.append(name) }
    }
    return names.sorted()
}

func printError(_ message: String) {
    var bytes = Array(message.utf8)
    _ = write(STDERR_FILENO, &bytes, bytes.count)
}

final class DocumentList: DirectoryWatcherDelegate {
    func show(_ directory: FileSystemPath) {
        let files = listFiles(in: directory)
        print("\(directory): \(files.count) file\(files.count == 1 ? "" : "s")")
        for file in files { print("  \(file)") }
        fflush(nil)  // stdout is block-buffered when piped; show each listing at once
    }

    func directoryDidChange(_ watcher: DirectoryWatcher) {
        show(watcher.path)
    }

    func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) {
        for change in changes where change.kind == .rootRemoved || change.kind == .rootMoved {
            let message = "document-list: \(change.path) was \(change.kind == .rootRemoved ? "removed" : "moved")\n"
            printError(message)
            exit(3)
        }
    }
}

let arguments = CommandLine.arguments.dropFirst()
if arguments.first == "-h" || arguments.first == "--help" || arguments.count > 1 {
    print("usage: document-list [DIRECTORY]")
    exit(arguments.count > 1 ? 2 : 0)
}
let list = DocumentList()
let watcher: DirectoryWatcher
do {
    watcher = try DirectoryWatcher.watchFolder(path: arguments.first ?? ".", delegate: list, queue: .main)
} catch {
    printError("document-list: \(error)\n")
    exit(1)
}
list.show(watcher.path)

signal(SIGINT, SIG_IGN)
let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
interrupt.setEventHandler {
    watcher.invalidate()
    exit(0)
}
interrupt.resume()
dispatchMain()
