/// What a fanotify mark asks for (what its records mean is ``MarkEvent``'s reading of a merged
/// record): pure functions.
enum FanotifyTranslation {
    /// What a fanotify mark covering a tree asks for, whatever the watchers selected: every change
    /// of a name, writes, attributes, a directory's own end. Opens, reads and closes without a
    /// write are added only for a watcher that asked for them (they are every read of the whole
    /// file system).
    static let baseMask: UInt64 =
        UInt64(EventMask.create | EventMask.delete | EventMask.modify | EventMask.attributes)
        | UInt64(EventMask.deleteSelf | EventMask.moveSelf) | MarkBits.rename | MarkBits.onDirectory
    /// The bits of a watcher's selection a mark adds beyond ``baseMask``.
    static let optionalBits = EventMask.open | EventMask.access | EventMask.closeNoWrite | EventMask.closeWrite

    /// The mark's mask for a watcher that selected `mask` (inotify bits).
    static func markMask(selecting mask: UInt32) -> UInt64 {
        baseMask | UInt64(mask & optionalBits)
    }
}
