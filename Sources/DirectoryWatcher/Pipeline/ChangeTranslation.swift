/// Turns kernel events into the changes a watcher reports. Pure functions.
enum ChangeTranslation {
    /// The change `event` means for a watch on `directory`, or nil when it means none for `mask`.
    ///
    /// `mask` is what this watcher asked for: the kernel watch serves every watcher of the
    /// directory with the union of their masks, so each filters its own.
    static func change(for event: InotifyEvent, in directory: FileSystemPath, mask: UInt32) -> DirectoryChange? {
        let isDirectory = event.has(InotifyMask.isDirectory)
        if event.name.isEmpty {
            // An event about the watched directory itself.
            if event.has(InotifyMask.deleteSelf | InotifyMask.unmount | InotifyMask.ignored) {
                return DirectoryChange(kind: .rootRemoved, path: directory, isDirectory: true)
            }
            if event.has(InotifyMask.moveSelf) {
                return DirectoryChange(kind: .rootMoved, path: directory, isDirectory: true)
            }
            if event.has(InotifyMask.attributes) && mask & InotifyMask.attributes != 0 {
                return DirectoryChange(kind: .attributesChanged, path: directory, isDirectory: true)
            }
            return nil
        }
        let kind: DirectoryChange.Kind
        let relevant = event.mask & mask
        if relevant & InotifyMask.create != 0 {
            kind = .created
        } else if relevant & InotifyMask.delete != 0 {
            kind = .removed
        } else if relevant & InotifyMask.modify != 0 {
            kind = .modified
        } else if relevant & InotifyMask.attributes != 0 {
            kind = .attributesChanged
        } else if relevant & InotifyMask.movedFrom != 0 {
            kind = .movedOut
        } else if relevant & InotifyMask.movedTo != 0 {
            kind = .movedIn
        } else {
            return nil
        }
        return DirectoryChange(kind: kind, path: directory.appending(bytes: event.name), isDirectory: isDirectory)
    }

    /// A paired move seen by a watcher that watches both ends.
    static func rename(
        from: InotifyEvent, in fromDirectory: FileSystemPath, to: InotifyEvent,
        in toDirectory: FileSystemPath
    ) -> DirectoryChange {
        DirectoryChange(
            kind: .renamed, path: toDirectory.appending(bytes: to.name),
            oldPath: fromDirectory.appending(bytes: from.name), isDirectory: to.has(InotifyMask.isDirectory))
    }

    /// Whether a change ends its watcher.
    static func endsWatch(_ change: DirectoryChange) -> Bool {
        change.kind == .rootRemoved || change.kind == .rootMoved
    }
}
