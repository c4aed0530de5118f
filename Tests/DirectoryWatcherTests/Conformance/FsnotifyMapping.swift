import DirectoryWatcher

/// How our changes read as the events fsnotify prints. MAPPING.md, next to this file, explains
/// each rule; keep the two in step.
enum FsnotifyMapping {
    /// A watch of the script's fsnotify `Watcher`: one of our watchers, as the script named it.
    struct Watch {
        /// The path as the script writes it: `/` is the script's directory.
        let path: String
        /// A file watch (`watchFile`) rather than a directory watch (`watchFolder`).
        let isFile: Bool
    }

    /// fsnotify's operation names for `watch PATH op ...`, as our events.
    static let selections: [String: DirectoryWatcher.Events] = [
        "default": .default,
        "create": .created,
        "write": .modified,
        "remove": .removed,
        "rename": .moved,
        "chmod": .attributesChanged,
        "open": .opened,
        "read": .accessed,
        "close_write": .writerClosed,
        "close_read": .readerClosed,
    ]

    /// The events fsnotify prints for `change`, reported by `watch`.
    ///
    /// - Parameters:
    ///   - relative: A path of ours as the script writes it.
    ///   - isWatched: Whether the script's `Watcher` watches a path (fsnotify's one rule across
    ///     the watches of a `Watcher`: a watched path's own removal is printed once, by its
    ///     parent's watch, when the parent is watched too).
    /// - Returns: nil for a change fsnotify reports on its error channel (an overflow, a failure).
    static func events(
        for change: DirectoryChange, by watch: Watch, relative: (FileSystemPath) -> String,
        isWatched: (String) -> Bool
    ) -> [FsnotifyEvent]? {
        let path = relative(change.path)
        let oldPath = change.oldPath.map(relative)
        func inScope(_ candidate: String) -> Bool { !watch.isFile || candidate == watch.path }
        func parentIsWatched(_ candidate: String) -> Bool {
            guard candidate != "/", let slash = candidate.lastIndex(of: "/") else { return false }
            let parent = slash == candidate.startIndex ? "/" : String(candidate[..<slash])
            return isWatched(parent)
        }
        switch change.kind {
        case .created:
            return [FsnotifyEvent("create", path)]
        case .removed:
            if watch.isFile && path == watch.path && parentIsWatched(path) { return [] }
            return [FsnotifyEvent("remove", path)]
        case .modified:
            return [FsnotifyEvent("write", path)]
        case .attributesChanged:
            return [FsnotifyEvent("chmod", path)]
        case .renamed:
            guard let oldPath else { return [FsnotifyEvent("create", path)] }
            var events: [FsnotifyEvent] = []
            if inScope(oldPath) { events.append(FsnotifyEvent("rename", oldPath)) }
            if inScope(path) { events.append(FsnotifyEvent("create", path, from: oldPath)) }
            return events
        case .exchanged:
            // fsnotify reports each of an exchange's two moves as a rename and a create.
            guard let oldPath else { return [] }
            return [
                FsnotifyEvent("rename", oldPath), FsnotifyEvent("create", path, from: oldPath),
                FsnotifyEvent("rename", path), FsnotifyEvent("create", oldPath, from: path),
            ].filter { inScope($0.path) }
        case .movedIn:
            return [FsnotifyEvent("create", path, from: oldPath)]
        case .movedOut:
            return [FsnotifyEvent("rename", path)]
        case .rootRemoved:
            // A file watch's directory: fsnotify watches the file's inode and never hears of it.
            if watch.isFile || parentIsWatched(path) { return [] }
            return [FsnotifyEvent("remove", path)]
        case .rootMoved:
            if watch.isFile { return [] }
            return [FsnotifyEvent("rename", path)]
        case .overflow, .failed:
            return nil
        case .opened:
            return [FsnotifyEvent("open", path)]
        case .accessed:
            return [FsnotifyEvent("read", path)]
        case .writerClosed:
            return [FsnotifyEvent("close_write", path)]
        case .readerClosed:
            return [FsnotifyEvent("close_read", path)]
        }
    }
}
