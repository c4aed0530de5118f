import CDirectoryWatcherShims

/// What `statx` says of a directory entry, as the library keeps it.
struct EntryStatus: Equatable, Sendable {
    /// A time as the file system keeps it.
    struct Time: Equatable, Sendable {
        var seconds: Int64
        var nanoseconds: UInt32
    }

    // Stored packed, in 58 bytes where the plain layout took 88: a kept directory holds one per
    // entry, and at 58 a kept entry's record is 64 bytes (``NameTable``). The change and birth
    // times are the kernel's clock at the change and at the creation (no call sets them), so
    // each is kept as nanoseconds since 1970, exact from 1678 to 2262; the modification time may
    // be set to any time (`utimensat`), so it keeps its seconds whole. The mode is `statx`'s 16
    // bits; the device, 32 (``device``).
    var inode: UInt64
    var size: Int64
    private var modifiedSeconds: Int64
    private var changedNanoseconds: Int64
    /// `noBirthTime` where the file system keeps none.
    private var bornNanoseconds: Int64
    var owner: UInt32
    var group: UInt32
    private var modifiedNanoseconds: UInt32
    private var storedDevice: UInt32
    private var storedMode: UInt16

    private static let noBirthTime = Int64.min

    /// The device, as glibc's `makedev` combines `statx`'s major and minor numbers. The kernel's
    /// device numbers are 32 bits (a 12-bit major, a 20-bit minor), and `makedev` puts those in
    /// the low 32 bits, so it is kept in 32; a number beyond them (none the kernel gives: a saved
    /// state's, damaged) is kept folded into 32 bits, and compares by that.
    var device: UInt64 {
        get { UInt64(storedDevice) }
        set { storedDevice = UInt32(exactly: newValue) ?? UInt32(truncatingIfNeeded: newValue ^ (newValue >> 32)) }
    }

    /// The type and permission bits.
    var mode: UInt32 {
        get { UInt32(storedMode) }
        set { storedMode = UInt16(truncatingIfNeeded: newValue) }
    }

    var modified: Time {
        get { Time(seconds: modifiedSeconds, nanoseconds: modifiedNanoseconds) }
        set { (modifiedSeconds, modifiedNanoseconds) = (newValue.seconds, newValue.nanoseconds) }
    }

    var changed: Time {
        get { Time(nanosecondsSince1970: changedNanoseconds) }
        set { changedNanoseconds = newValue.nanosecondsSince1970 }
    }

    /// Nil where the file system keeps no birth time.
    var born: Time? {
        get { bornNanoseconds == Self.noBirthTime ? nil : Time(nanosecondsSince1970: bornNanoseconds) }
        set {
            bornNanoseconds = newValue.map { max($0.nanosecondsSince1970, Self.noBirthTime + 1) } ?? Self.noBirthTime
        }
    }

    init(_ status: cdw_entry_status) {
        storedDevice = 0
        inode = status.inode
        size = status.size
        modifiedSeconds = status.modified_seconds
        modifiedNanoseconds = status.modified_nanoseconds
        changedNanoseconds =
            Time(seconds: status.changed_seconds, nanoseconds: status.changed_nanoseconds).nanosecondsSince1970
        owner = status.uid
        group = status.gid
        storedMode = UInt16(truncatingIfNeeded: status.mode)
        bornNanoseconds = Self.noBirthTime
        device = status.device
        if status.mask & 0x800 != 0 {  // STATX_BTIME
            born = Time(seconds: status.born_seconds, nanoseconds: status.born_nanoseconds)
        }
    }
}

extension EntryStatus.Time {
    /// The time as nanoseconds since 1970, clamped to what an `Int64` holds (1678 to 2262).
    var nanosecondsSince1970: Int64 {
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflowed) = whole.addingReportingOverflow(Int64(nanoseconds))
        return overflowed ? .max : sum
    }

    init(nanosecondsSince1970 value: Int64) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: 1_000_000_000)
        self =
            remainder < 0
            ? .init(seconds: quotient - 1, nanoseconds: UInt32(remainder + 1_000_000_000))
            : .init(seconds: quotient, nanoseconds: UInt32(remainder))
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

extension EntryStatus {
    /// The status from its stored fields, as ``storedTimes`` gives them (a saved state's).
    init(
        device: UInt64, inode: UInt64, size: Int64, modified: Time, changedNanoseconds: Int64,
        bornNanoseconds: Int64, owner: UInt32, group: UInt32, mode: UInt16
    ) {
        self.storedDevice = 0
        self.inode = inode
        self.size = size
        self.modifiedSeconds = modified.seconds
        self.modifiedNanoseconds = modified.nanoseconds
        self.changedNanoseconds = changedNanoseconds
        self.bornNanoseconds = bornNanoseconds
        self.owner = owner
        self.group = group
        self.storedMode = mode
        self.device = device
    }

    /// The change and birth times as stored: nanoseconds since 1970, the birth time `Int64.min`
    /// where the file system keeps none.
    var storedTimes: (changed: Int64, born: Int64) { (changedNanoseconds, bornNanoseconds) }
}
