import Glibc

/// One record of a backend that marks whole file systems and names directories by handle
/// (``FileSystemMarkBackend``; fanotify's records with `FAN_REPORT_DFID_NAME` are these).
///
/// Its names and handles stay in the bytes of the read, at offsets: copying a record (the loop
/// lends each one to the router out of the parser's array) is then one retain, where a handle of
/// its own each would be four, and a handle is made only when the router's table is asked.
struct MarkEvent: Equatable, Sendable {
    /// What happened: ``EventMask``'s bits, and ``MarkBits``' (fanotify's mask is these: it
    /// shares inotify's bits, `IN_CREATE` is `FAN_CREATE`). The kernel may merge several events about
    /// one name into one record, whose mask is then their union.
    var mask: UInt64
    /// Holds the names at their ranges and the handles at their offsets: for a parsed event, one
    /// copy of the bytes its read returned, shared by every event of that read (as
    /// ``BackendEvent`` shares its read's).
    private(set) var storage: [UInt8]
    private(set) var nameRange: Range<Int>
    private(set) var newNameRange: Range<Int>
    /// Where the handles start in ``storage`` (``Handles``), or -1 for none.
    private let directoryAt: Int32
    private let newDirectoryAt: Int32
    private let objectAt: Int32

    /// Where a record's handles and names are in the bytes of its read; -1 for a handle it has
    /// not. A handle there is laid out as fanotify writes it: the file system's 8-byte id, then
    /// `struct file_handle` (`handle_bytes`, `handle_type`, the bytes), checked to fit.
    struct Handles {
        var directory = -1
        var name = 0..<0
        var newDirectory = -1
        var newName = 0..<0
        var object = -1
    }

    /// A record read from the bytes of its read, whose handles and names are at `handles`.
    init(mask: UInt64, sharing storage: [UInt8], at handles: Handles) {
        self.mask = mask
        self.storage = storage
        nameRange = handles.name
        newNameRange = handles.newName
        directoryAt = Int32(handles.directory)
        newDirectoryAt = Int32(handles.newDirectory)
        objectAt = Int32(handles.object)
    }

    init(
        mask: UInt64, directory: KernelHandle? = nil, name: [UInt8] = [], newDirectory: KernelHandle? = nil,
        newName: [UInt8] = [], object: KernelHandle? = nil
    ) {
        var storage = name + newName
        func append(_ handle: KernelHandle?) -> Int {
            guard let handle else { return -1 }
            let start = storage.count
            storage += handle.fileSystemID
            withUnsafeBytes(of: UInt32(handle.bytes.count).littleEndian) { storage += $0 }
            withUnsafeBytes(of: handle.type.littleEndian) { storage += $0 }
            storage += handle.bytes
            return start
        }
        var handles = Handles(name: 0..<name.count, newName: name.count..<(name.count + newName.count))
        handles.directory = append(directory)
        handles.newDirectory = append(newDirectory)
        handles.object = append(object)
        self.init(mask: mask, sharing: storage, at: handles)
    }

    /// The directory that holds the entry (for `FAN_RENAME`, the one it left), and the entry's
    /// name (``name``); "." for an event about the directory itself. Nil for an overflow, or an
    /// event about a file that no directory holds any more (reported by its own handle alone).
    var directory: KernelHandle? { handle(at: directoryAt) }
    /// For `FAN_RENAME`: the directory the entry went to, and its name there (``newName``).
    var newDirectory: KernelHandle? { handle(at: newDirectoryAt) }
    /// The handle of a directory created or of an entry renamed (the entry's own,
    /// `FAN_REPORT_TARGET_FID`, since 5.17); nil for any other record.
    var object: KernelHandle? { handle(at: objectAt) }

    var name: [UInt8] { Array(storage[nameRange]) }
    var newName: [UInt8] { Array(storage[newNameRange]) }

    /// Whether the directory of this record (the new one, `renamed`) is `handle`, compared in
    /// place: nothing is made.
    func names(_ handle: KernelHandle, renamed: Bool = false) -> Bool {
        let start = Int(renamed ? newDirectoryAt : directoryAt)
        guard start >= 0 else { return false }
        return storage.withUnsafeBytes { bytes in
            handle.matches(
                fileSystemID: UnsafeRawBufferPointer(rebasing: bytes[start..<(start + 8)]),
                type: bytes.loadUnaligned(fromByteOffset: start + 12, as: Int32.self),
                bytes: Self.handleBytes(in: bytes, at: start))
        }
    }

    /// The handle whose bytes start at `start`, made now.
    private func handle(at start: Int32) -> KernelHandle? {
        guard start >= 0 else { return nil }
        let start = Int(start)
        return storage.withUnsafeBytes { bytes in
            KernelHandle(
                fileSystemID: UnsafeRawBufferPointer(rebasing: bytes[start..<(start + 8)]),
                type: bytes.loadUnaligned(fromByteOffset: start + 12, as: Int32.self),
                bytes: Self.handleBytes(in: bytes, at: start))
        }
    }

    /// The bytes of the handle at `start` (its length, `handle_bytes`, was checked to fit when
    /// the record was read; a slice traps rather than read past the storage).
    private static func handleBytes(in bytes: UnsafeRawBufferPointer, at start: Int) -> UnsafeRawBufferPointer {
        let length = Int(bytes.loadUnaligned(fromByteOffset: start + 8, as: UInt32.self))
        return UnsafeRawBufferPointer(rebasing: bytes[(start + 16)..<(start + 16 + length)])
    }

    /// The backend event with this record's name (the new one, `renamed`), sharing its bytes.
    func backendEvent(wd: Int32, mask: UInt32, cookie: UInt32 = 0, renamed: Bool = false) -> BackendEvent {
        BackendEvent(wd: wd, mask: mask, cookie: cookie, nameIn: storage, at: renamed ? newNameRange : nameRange)
    }

    static func == (lhs: MarkEvent, rhs: MarkEvent) -> Bool {
        lhs.mask == rhs.mask && lhs.directory == rhs.directory && lhs.newDirectory == rhs.newDirectory
            && lhs.object == rhs.object && lhs.name == rhs.name && lhs.newName == rhs.newName
    }

    var isOverflow: Bool { mask & MarkBits.queueOverflow != 0 }
    var isRename: Bool { mask & MarkBits.rename != 0 }
    var isDirectory: Bool { mask & MarkBits.onDirectory != 0 }
    /// An event about the directory itself rather than an entry of it.
    var isAboutDirectoryItself: Bool { nameRange.count == 1 && storage[nameRange.lowerBound] == UInt8(ascii: ".") }
}

/// A mark event's bits beyond ``EventMask``'s (fanotify's `FAN_RENAME`, `FAN_ONDIR`,
/// `FAN_Q_OVERFLOW`).
enum MarkBits {
    static let rename: UInt64 = 0x1000_0000
    static let onDirectory: UInt64 = 0x4000_0000
    static let queueOverflow: UInt64 = 0x4000
}

/// What a record means as ``BackendEvent``s. A backend that marks a file system may merge events
/// about one name that are still queued into one record, whose mask is their union (fanotify
/// does): `touch f; rm f` can be read as one `CREATE|DELETE` of `f`. The order is gone, so it is
/// chosen from the entry's state now: an entry that exists was removed then created again (a
/// replace), one that does not was created and then removed.
extension MarkEvent {
    /// In the order they are reported: creation first, then what is done to the entry, then its
    /// removal.
    private static let order: [UInt32] = [
        EventMask.create, EventMask.open, EventMask.access, EventMask.modify, EventMask.attributes,
        EventMask.closeNoWrite, EventMask.closeWrite, EventMask.delete,
    ]

    /// The events, one ``EventMask`` bit each (and ``EventMask/isDirectory`` for a directory),
    /// that a record about an entry stands for, one at a time, with no array made (once per
    /// record routed). `exists` is asked only when the record is both a creation and a removal.
    @inline(__always)
    static func forEachEntryEvent(_ mask: UInt64, exists: () -> Bool, _ body: (UInt32) -> Void) {
        let bits = UInt32(truncatingIfNeeded: mask)
        let directory = mask & MarkBits.onDirectory != 0 ? EventMask.isDirectory : 0
        // The common record is one bit, or a creation with what followed it.
        let replaced = bits & EventMask.create != 0 && bits & EventMask.delete != 0 && exists()
        if replaced { body(EventMask.delete | directory) }
        for bit in order where bits & bit != 0 {
            if replaced && bit == EventMask.delete { continue }
            body(bit | directory)
        }
    }

    /// The events, with no name, that a record about a directory itself (its name ".")
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
