import CDirectoryWatcherShims

/// What `statx` says of a directory entry, as the library keeps it.
struct EntryStatus: Equatable, Sendable {
    /// A time as the file system keeps it.
    struct Time: Equatable, Sendable {
        var seconds: Int64
        var nanoseconds: UInt32
    }

    /// The type and permission bits.
    var mode: UInt32
    var owner: UInt32
    var group: UInt32
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modified: Time
    var changed: Time
    /// Nil where the file system keeps no birth time.
    var born: Time?

    init(_ status: cdw_entry_status) {
        mode = status.mode
        owner = status.uid
        group = status.gid
        device = status.device
        inode = status.inode
        size = status.size
        modified = Time(seconds: status.modified_seconds, nanoseconds: status.modified_nanoseconds)
        changed = Time(seconds: status.changed_seconds, nanoseconds: status.changed_nanoseconds)
        let hasBirthTime = status.mask & 0x800 != 0  // STATX_BTIME
        born = hasBirthTime ? Time(seconds: status.born_seconds, nanoseconds: status.born_nanoseconds) : nil
    }
}

extension EntryStatus {
    enum Kind: Equatable, Sendable { case file, directory, symbolicLink, other }

    var kind: Kind {
        switch mode & 0o170000 {
        case 0o100000: return .file
        case 0o040000: return .directory
        case 0o120000: return .symbolicLink
        default: return .other
        }
    }

    /// The permission bits (the mode without the type).
    var permissions: UInt32 { mode & 0o7777 }
}
