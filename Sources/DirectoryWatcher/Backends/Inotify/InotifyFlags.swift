import Glibc

/// inotify's bits that ask the kernel for something rather than report an event. (Its event bits
/// are ``EventMask``'s.)
enum InotifyFlags {
    static let onlyDirectory = UInt32(IN_ONLYDIR)
    static let excludeUnlinked = UInt32(IN_EXCL_UNLINK)
    static let dontFollow = UInt32(IN_DONT_FOLLOW)
    static let maskAdd = UInt32(IN_MASK_ADD)

    /// What every directory watch asks: a directory or nothing, no events for entries already
    /// unlinked, and the events asked for added to what the watch has.
    static let directoryWatch = onlyDirectory | excludeUnlinked | maskAdd
}
