// folder-notifications: the GCD pattern of the seed post, on Linux. A watcher's handler posts
// "FolderDidChange" on the main queue with the changes; one observer prints each change, another
// lists the folder's files again, as the post's observer reloaded its table.
//
//     swift run folder-notifications [DIRECTORY]     (default: the current directory; Ctrl-C stops)
//
// Foundation is this program's import, for NotificationCenter: the library does not use it.

import DirectoryWatcher
import Foundation

extension Notification.Name {
    /// Posted on the main thread; `userInfo[changesKey]` holds the batch as `[DirectoryChange]`.
    static let folderDidChange = Notification.Name("FolderDidChange")
}

let changesKey = "changes"

/// The names of the regular files in `folder`, sorted (a symbolic link counts as what it points
/// to). The post's observer listed the folder the same way, skipping directories.
func regularFiles(in folder: String) -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
    return names.filter { name in
        var info = stat()
        return stat(folder + "/" + name, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }.sorted()
}

func printError(_ message: String) {
    FileHandle.standardError.write(Data(message.utf8))
}

func show(_ folder: String) {
    let files = regularFiles(in: folder)
    print("\(folder): \(files.count) file\(files.count == 1 ? "" : "s")")
    for file in files { print("  \(file)") }
    fflush(nil)  // stdout is block-buffered when piped; show each listing at once
}

let arguments = CommandLine.arguments.dropFirst()
if arguments.first == "-h" || arguments.first == "--help" || arguments.count > 1 {
    print("usage: folder-notifications [DIRECTORY]")
    exit(arguments.count > 1 ? 2 : 0)
}

let watcher: DirectoryWatcher
do {
    // On .main, so the notification is posted on the main thread and its observers run there.
    // The post's vnode source posted from its own queue, so its observer ran on a background thread.
    watcher = try DirectoryWatcher.watchFolder(path: arguments.first ?? ".", queue: .main) { changes in
        NotificationCenter.default.post(name: .folderDidChange, object: nil, userInfo: [changesKey: changes])
        // The watcher has stopped itself: its folder is gone, and there is nothing left to list.
        if let last = changes.last, last.kind == .rootRemoved || last.kind == .rootMoved {
            printError("folder-notifications: \(last.path) was \(last.kind == .rootRemoved ? "removed" : "moved")\n")
            exit(3)
        }
    }
} catch {
    printError("folder-notifications: \(error)\n")
    exit(1)
}
// The path the watcher resolved (absolute); a name that is not UTF-8 keeps the argument as given.
let folder = watcher.path.string ?? arguments.first ?? "."

// queue nil: each observer runs in the posting thread, which is the main thread here.
// NotificationCenter promises no order among observers, so each one stands alone.
let printer = NotificationCenter.default.addObserver(forName: .folderDidChange, object: nil, queue: nil) {
    notification in
    guard let changes = notification.userInfo?[changesKey] as? [DirectoryChange] else { return }
    for change in changes { print("changed: \(change)") }
    fflush(nil)
}
let lister = NotificationCenter.default.addObserver(forName: .folderDidChange, object: nil, queue: nil) {
    [folder] _ in
    show(folder)
}
// Like the post's app at launch: list what is there before the first change.
show(folder)

signal(SIGINT, SIG_IGN)
let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
interrupt.setEventHandler {
    watcher.invalidate()
    // By the observer tokens: the post's removeObserver: was passed the name, and removed nothing.
    NotificationCenter.default.removeObserver(printer)
    NotificationCenter.default.removeObserver(lister)
    exit(0)
}
interrupt.resume()
dispatchMain()
