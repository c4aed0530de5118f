/// One event a backend reports, in the router's terms: which directory (the descriptor its
/// backend gave it when asked to watch it), which entry of it (a name; empty for the directory
/// itself), what happened (``EventMask``), and for a rename's two halves the token that pairs
/// them.
///
/// Every backend hands the router these and nothing else. inotify's records are these already
/// (``EventMask``'s bits are inotify's, so its parser translates nothing); fanotify's are
/// translated into them (``FanotifyTranslation``); the tests' in-memory backend makes them.
struct BackendEvent: Equatable, Sendable {
    /// The watched directory's descriptor, as its backend numbered it; -1 for a lost-events
    /// notice (``EventMask/queueOverflow``).
    var wd: Int32
    var mask: UInt32
    /// Pairs a rename's ``EventMask/movedFrom`` with its ``EventMask/movedTo``; 0 otherwise.
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

    static func == (lhs: BackendEvent, rhs: BackendEvent) -> Bool {
        lhs.wd == rhs.wd && lhs.mask == rhs.mask && lhs.cookie == rhs.cookie && lhs.name == rhs.name
    }

    func has(_ bits: UInt32) -> Bool { mask & bits != 0 }
    var isOverflow: Bool { wd == -1 && has(EventMask.queueOverflow) }
}

/// What happened, as bits of a `UInt32`. The bits are inotify's (a test checks each against the
/// kernel's constant), so that inotify, the backend every watcher uses by default, hands its
/// records over as they are read; another backend translates into them.
enum EventMask {
    static let access: UInt32 = 0x0000_0001
    static let modify: UInt32 = 0x0000_0002
    static let attributes: UInt32 = 0x0000_0004
    static let closeWrite: UInt32 = 0x0000_0008
    static let closeNoWrite: UInt32 = 0x0000_0010
    static let open: UInt32 = 0x0000_0020
    static let movedFrom: UInt32 = 0x0000_0040
    static let movedTo: UInt32 = 0x0000_0080
    static let create: UInt32 = 0x0000_0100
    static let delete: UInt32 = 0x0000_0200
    /// The watched directory itself was removed.
    static let deleteSelf: UInt32 = 0x0000_0400
    /// The watched directory itself was moved.
    static let moveSelf: UInt32 = 0x0000_0800
    /// The watched directory's file system was unmounted.
    static let unmount: UInt32 = 0x0000_2000
    /// Events were lost (the kernel's queue overflowed, or a read could not be trusted).
    static let queueOverflow: UInt32 = 0x0000_4000
    /// The backend no longer watches the directory (it is gone, or its watch was removed).
    static let ignored: UInt32 = 0x0000_8000
    /// The entry is a directory.
    static let isDirectory: UInt32 = 0x4000_0000

    /// What a directory watcher asks for by default.
    static let directoryWatch: UInt32 =
        create | delete | modify | attributes | movedFrom | movedTo | deleteSelf | moveSelf
    /// What every watch asks for whatever events were selected: the directory's own end.
    static let lifecycle: UInt32 = deleteSelf | moveSelf
    /// Every change of an entry's name: what a kept snapshot of the directory must see.
    static let names: UInt32 = create | delete | movedFrom | movedTo
}
