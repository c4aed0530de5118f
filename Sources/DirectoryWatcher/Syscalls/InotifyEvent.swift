import Glibc

/// One record read from an inotify descriptor.
struct InotifyEvent: Equatable, Sendable {
    /// The watch descriptor; -1 for `IN_Q_OVERFLOW`.
    var wd: Int32
    var mask: UInt32
    /// Pairs `IN_MOVED_FROM` with `IN_MOVED_TO`; 0 otherwise.
    var cookie: UInt32
    /// Holds the name at `nameStart..<nameEnd`: for a parsed event, one copy of the bytes its read
    /// returned, shared by every event of that read, so a read allocates once rather than once
    /// per name. (A plain array and two offsets rather than an `ArraySlice`: copying the event,
    /// as every stage does, is then one inline retain.)
    private let storage: [UInt8]
    private let nameStart: Int32
    private let nameEnd: Int32

    /// The entry's name inside the watched directory, without the kernel's NUL padding.
    /// Empty for events on the watched object itself.
    var name: ArraySlice<UInt8> { storage[Int(nameStart)..<Int(nameEnd)] }

    init(wd: Int32, mask: UInt32, cookie: UInt32 = 0, name: [UInt8] = []) {
        self.init(wd: wd, mask: mask, cookie: cookie, nameIn: name, at: 0..<name.count)
    }

    /// An event whose name is `storage[range]`.
    init(wd: Int32, mask: UInt32, cookie: UInt32, nameIn storage: [UInt8], at range: Range<Int>) {
        self.wd = wd
        self.mask = mask
        self.cookie = cookie
        self.storage = storage
        self.nameStart = Int32(range.lowerBound)
        self.nameEnd = Int32(range.upperBound)
    }

    static func == (lhs: InotifyEvent, rhs: InotifyEvent) -> Bool {
        lhs.wd == rhs.wd && lhs.mask == rhs.mask && lhs.cookie == rhs.cookie && lhs.name == rhs.name
    }

    func has(_ bits: UInt32) -> Bool { mask & bits != 0 }
    var isOverflow: Bool { wd == -1 && has(InotifyMask.queueOverflow) }
}

/// The inotify bits, as `UInt32` so they combine with the kernel's masks without casts.
enum InotifyMask {
    static let access = UInt32(IN_ACCESS)
    static let modify = UInt32(IN_MODIFY)
    static let attributes = UInt32(IN_ATTRIB)
    static let closeWrite = UInt32(IN_CLOSE_WRITE)
    static let closeNoWrite = UInt32(IN_CLOSE_NOWRITE)
    static let open = UInt32(IN_OPEN)
    static let movedFrom = UInt32(IN_MOVED_FROM)
    static let movedTo = UInt32(IN_MOVED_TO)
    static let create = UInt32(IN_CREATE)
    static let delete = UInt32(IN_DELETE)
    static let deleteSelf = UInt32(IN_DELETE_SELF)
    static let moveSelf = UInt32(IN_MOVE_SELF)
    static let unmount = UInt32(IN_UNMOUNT)
    static let queueOverflow = UInt32(IN_Q_OVERFLOW)
    static let ignored = UInt32(IN_IGNORED)
    static let onlyDirectory = UInt32(IN_ONLYDIR)
    static let excludeUnlinked = UInt32(IN_EXCL_UNLINK)
    static let dontFollow = UInt32(IN_DONT_FOLLOW)
    static let maskAdd = UInt32(IN_MASK_ADD)
    static let isDirectory = UInt32(IN_ISDIR)

    /// What a directory watcher asks the kernel for by default.
    static let directoryWatch: UInt32 =
        create | delete | modify | attributes | movedFrom | movedTo | deleteSelf | moveSelf
    /// What every watch asks for whatever events were selected: the directory's own end.
    static let lifecycle: UInt32 = deleteSelf | moveSelf
    /// Every change of an entry's name: what a kept snapshot of the directory must see.
    static let names: UInt32 = create | delete | movedFrom | movedTo
}
