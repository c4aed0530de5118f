/// Turns kernel events into the changes a watcher reports. Pure functions.
enum ChangeTranslation {
    /// The change `event` means for a watch on `directory`, or nil when it means none for `mask`.
    ///
    /// `mask` is what this watcher asked for: the kernel watch serves every watcher of the
    /// directory with the union of their masks, so each filters its own. `entry`, for a file
    /// watch, is the one name it follows: events about other names, and about the directory
    /// itself short of its removal or move, mean nothing to it.
    static func change(
        for event: BackendEvent, in directory: FileSystemPath, mask: UInt32, entry: WatchedEntry? = nil
    ) -> DirectoryChange? {
        let isDirectory = event.has(EventMask.isDirectory)
        if event.name.isEmpty {
            // An event about the watched directory itself.
            if event.has(EventMask.deleteSelf | EventMask.unmount | EventMask.ignored) {
                return DirectoryChange(kind: .rootRemoved, path: directory, isDirectory: true)
            }
            if event.has(EventMask.moveSelf) {
                return DirectoryChange(kind: .rootMoved, path: directory, isDirectory: true)
            }
            guard entry == nil, let kind = kind(of: event.mask & mask) else { return nil }
            switch kind {
            case .attributesChanged, .opened, .accessed, .readerClosed:
                return DirectoryChange(kind: kind, path: directory, isDirectory: true)
            default:
                return nil
            }
        }
        if let entry, entry.name[...] != event.name { return nil }
        guard let kind = kind(of: event.mask & mask) else { return nil }
        let path = entry?.path ?? directory.appending(bytes: event.name)
        return DirectoryChange(kind: kind, path: path, isDirectory: isDirectory)
    }

    /// The change kind for the event bits a watcher asked for; nil when none is left.
    private static func kind(of relevant: UInt32) -> DirectoryChange.Kind? {
        if relevant & EventMask.create != 0 { return .created }
        if relevant & EventMask.delete != 0 { return .removed }
        if relevant & EventMask.modify != 0 { return .modified }
        if relevant & EventMask.attributes != 0 { return .attributesChanged }
        if relevant & EventMask.movedFrom != 0 { return .movedOut }
        if relevant & EventMask.movedTo != 0 { return .movedIn }
        if relevant & EventMask.open != 0 { return .opened }
        if relevant & EventMask.access != 0 { return .accessed }
        if relevant & EventMask.closeWrite != 0 { return .writerClosed }
        if relevant & EventMask.closeNoWrite != 0 { return .readerClosed }
        return nil
    }

    /// A paired move seen by a watcher that watches both ends; the paths are as that watcher
    /// knows them.
    static func rename(to: BackendEvent, path: FileSystemPath, from oldPath: FileSystemPath) -> DirectoryChange {
        DirectoryChange(kind: .renamed, path: path, oldPath: oldPath, isDirectory: to.has(EventMask.isDirectory))
    }

    /// Whether a watcher that asked for `mask` reports changes of `kind` (a rescan's changes).
    static func selects(_ mask: UInt32, _ kind: DirectoryChange.Kind) -> Bool {
        switch kind {
        case .created: return mask & EventMask.create != 0
        case .removed: return mask & EventMask.delete != 0
        case .modified: return mask & EventMask.modify != 0
        case .attributesChanged: return mask & EventMask.attributes != 0
        case .renamed, .exchanged, .movedIn, .movedOut: return mask & (EventMask.movedFrom | EventMask.movedTo) != 0
        default: return true
        }
    }

    /// Whether a change ends its watcher.
    static func endsWatch(_ change: DirectoryChange) -> Bool {
        change.kind == .rootRemoved || change.kind == .rootMoved
    }
}
