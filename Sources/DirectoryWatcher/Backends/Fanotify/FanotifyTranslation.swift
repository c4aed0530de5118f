/// What a fanotify record means as inotify events, which the router understands: pure functions.
///
/// fanotify shares inotify's bits for the events both have (`FAN_CREATE` is `IN_CREATE`), but
/// the kernel merges events about one name that are still queued into one record, whose mask is
/// their union: `touch f; rm f` can be read as one `CREATE|DELETE` of `f`. The order is gone, so
/// it is chosen from the entry's state now: an entry that exists was removed then created again
/// (a replace), one that does not was created and then removed.
enum FanotifyTranslation {
    /// What a fanotify mark covering a tree asks for, whatever the watchers selected: every change
    /// of a name, writes, attributes, a directory's own end. Opens, reads and closes without a
    /// write are added only for a watcher that asked for them (they are every read of the whole
    /// file system).
    static let baseMask: UInt64 =
        UInt64(EventMask.create | EventMask.delete | EventMask.modify | EventMask.attributes)
        | UInt64(EventMask.deleteSelf | EventMask.moveSelf) | FanotifyMask.rename | FanotifyMask.onDirectory
    /// The bits of a watcher's selection a mark adds beyond ``baseMask``.
    static let optionalBits = EventMask.open | EventMask.access | EventMask.closeNoWrite | EventMask.closeWrite

    /// The mark's mask for a watcher that selected `mask` (inotify bits).
    static func markMask(selecting mask: UInt32) -> UInt64 {
        baseMask | UInt64(mask & optionalBits)
    }

    /// In the order they are reported: creation first, then what is done to the entry, then its
    /// removal.
    private static let order: [UInt32] = [
        EventMask.create, EventMask.open, EventMask.access, EventMask.modify, EventMask.attributes,
        EventMask.closeNoWrite, EventMask.closeWrite, EventMask.delete,
    ]

    /// The inotify events, one bit each (and `IN_ISDIR` for a directory), that a record about an
    /// entry stands for. `exists` is asked only when the record is both a creation and a removal.
    static func entryEvents(_ mask: UInt64, exists: () -> Bool) -> [UInt32] {
        var events: [UInt32] = []
        forEachEntryEvent(mask, exists: exists) { events.append($0) }
        return events
    }

    /// ``entryEvents(_:exists:)`` one at a time, with no array made (once per record routed).
    @inline(__always)
    static func forEachEntryEvent(_ mask: UInt64, exists: () -> Bool, _ body: (UInt32) -> Void) {
        let bits = UInt32(truncatingIfNeeded: mask)
        let directory = mask & FanotifyMask.onDirectory != 0 ? EventMask.isDirectory : 0
        // The common record is one bit, or a creation with what followed it.
        let replaced = bits & EventMask.create != 0 && bits & EventMask.delete != 0 && exists()
        if replaced { body(EventMask.delete | directory) }
        for bit in order where bits & bit != 0 {
            if replaced && bit == EventMask.delete { continue }
            body(bit | directory)
        }
    }

    /// The inotify events, with no name, that a record about a directory itself (its name ".")
    /// stands for: its attributes, and its own removal or move, the last.
    static func directoryEvents(_ mask: UInt64) -> [UInt32] {
        let bits = UInt32(truncatingIfNeeded: mask)
        var events: [UInt32] = []
        for bit in [EventMask.attributes, EventMask.open, EventMask.access, EventMask.closeNoWrite]
        where bits & bit != 0 {
            events.append(bit | EventMask.isDirectory)
        }
        // Removed wins over moved: a directory moved and then removed is gone.
        if bits & EventMask.deleteSelf != 0 {
            events.append(EventMask.deleteSelf | EventMask.isDirectory)
        } else if bits & EventMask.moveSelf != 0 {
            events.append(EventMask.moveSelf | EventMask.isDirectory)
        }
        return events
    }
}
