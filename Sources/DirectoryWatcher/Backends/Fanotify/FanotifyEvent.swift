import Glibc

/// A file handle as fanotify names a directory: the file system's id, the handle's type and its
/// bytes, kept end to end as one key (the router's table from handle to directory hashes it once
/// per event).
struct KernelHandle: Hashable, Sendable {
    /// The 8 bytes of the file system's id, the handle's type (4 bytes, little-endian), the handle.
    let key: [UInt8]

    init(key: [UInt8]) { self.key = key }

    /// The key's bytes in one call: the default hashes an array element by element, twenty
    /// calls for a key of twenty bytes, once per event routed.
    func hash(into hasher: inout Hasher) {
        key.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func == (lhs: KernelHandle, rhs: KernelHandle) -> Bool { lhs.key == rhs.key }

    /// Whether this is the handle of these raw parts (compared in place, nothing made).
    func matches(fileSystemID: UnsafeRawBufferPointer, type: Int32, bytes: UnsafeRawBufferPointer) -> Bool {
        guard key.count == 12 + bytes.count else { return false }
        return key.withUnsafeBytes { key in
            memcmp(key.baseAddress!, fileSystemID.baseAddress!, 8) == 0
                && key.loadUnaligned(fromByteOffset: 8, as: Int32.self) == type.littleEndian
                && (bytes.isEmpty || memcmp(key.baseAddress! + 12, bytes.baseAddress!, bytes.count) == 0)
        }
    }

    /// A handle read from a record: the file system's id, then `struct file_handle`'s type and
    /// bytes, copied into the key at once.
    init(fileSystemID: UnsafeRawBufferPointer, type: Int32, bytes: UnsafeRawBufferPointer) {
        key = [UInt8](unsafeUninitializedCapacity: 12 + bytes.count) { buffer, count in
            let base = UnsafeMutableRawBufferPointer(buffer)
            base.copyMemory(from: fileSystemID)
            withUnsafeBytes(of: type.littleEndian) {
                base.baseAddress!.advanced(by: 8).copyMemory(from: $0.baseAddress!, byteCount: 4)
            }
            if !bytes.isEmpty {
                base.baseAddress!.advanced(by: 12).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            }
            count = 12 + bytes.count
        }
    }

    init(fileSystemID: some Collection<UInt8>, type: Int32, bytes: some Collection<UInt8>) {
        var key: [UInt8] = []
        key.reserveCapacity(12 + bytes.count)
        key += fileSystemID
        withUnsafeBytes(of: type.littleEndian) { key += $0 }
        key += bytes
        self.key = key
    }

    var fileSystemID: ArraySlice<UInt8> { key[0..<8] }
    var type: Int32 {
        var value: UInt32 = 0
        for byte in key[8..<12].reversed() { value = value << 8 | UInt32(byte) }
        return Int32(bitPattern: value)
    }
    var bytes: ArraySlice<UInt8> { key[12...] }
}

/// One record read from a fanotify descriptor that reports directories' handles and entries'
/// names (`FAN_REPORT_DFID_NAME`).
struct FanotifyEvent: Equatable, Sendable {
    /// The kernel's mask: the inotify bits it shares (`IN_CREATE` is `FAN_CREATE`), and
    /// `FAN_RENAME`, `FAN_ONDIR`, `FAN_Q_OVERFLOW`. The kernel may merge several events about
    /// one name into one record, whose mask is then their union.
    var mask: UInt64
    /// The directory that holds the entry (for `FAN_RENAME`, the one it left), and the entry's
    /// name (``name``); "." for an event about the directory itself. Nil for an overflow, or an
    /// event about a file that no directory holds any more (reported by its own handle alone).
    var directory: KernelHandle?
    /// For `FAN_RENAME`: the directory the entry went to, and its name there (``newName``).
    var newDirectory: KernelHandle?
    /// The handle of a directory created or of an entry renamed (the entry's own,
    /// `FAN_REPORT_TARGET_FID`, since 5.17); nil for any other record.
    var object: KernelHandle?
    /// Holds the names at their ranges: for a parsed event, one copy of the bytes its read
    /// returned, shared by every event of that read (as ``BackendEvent`` shares its read's).
    var storage: [UInt8] = []
    var nameRange: Range<Int> = 0..<0
    var newNameRange: Range<Int> = 0..<0

    init(
        mask: UInt64, directory: KernelHandle? = nil, name: [UInt8] = [], newDirectory: KernelHandle? = nil,
        newName: [UInt8] = [], object: KernelHandle? = nil
    ) {
        self.mask = mask
        self.directory = directory
        self.newDirectory = newDirectory
        self.object = object
        storage = name + newName
        nameRange = 0..<name.count
        newNameRange = name.count..<(name.count + newName.count)
    }

    var name: [UInt8] { Array(storage[nameRange]) }
    var newName: [UInt8] { Array(storage[newNameRange]) }

    /// The inotify event with this record's name (the new one, `renamed`), sharing its bytes.
    func inotifyEvent(wd: Int32, mask: UInt32, cookie: UInt32 = 0, renamed: Bool = false) -> BackendEvent {
        BackendEvent(wd: wd, mask: mask, cookie: cookie, nameIn: storage, at: renamed ? newNameRange : nameRange)
    }

    static func == (lhs: FanotifyEvent, rhs: FanotifyEvent) -> Bool {
        lhs.mask == rhs.mask && lhs.directory == rhs.directory && lhs.newDirectory == rhs.newDirectory
            && lhs.object == rhs.object && lhs.name == rhs.name && lhs.newName == rhs.newName
    }

    var isOverflow: Bool { mask & FanotifyMask.queueOverflow != 0 }
    var isRename: Bool { mask & FanotifyMask.rename != 0 }
    var isDirectory: Bool { mask & FanotifyMask.onDirectory != 0 }
    /// An event about the directory itself rather than an entry of it.
    var isAboutDirectoryItself: Bool { nameRange.count == 1 && storage[nameRange.lowerBound] == UInt8(ascii: ".") }
}

/// fanotify's bits beyond inotify's.
enum FanotifyMask {
    static let rename: UInt64 = 0x1000_0000
    static let onDirectory: UInt64 = 0x4000_0000
    static let queueOverflow: UInt64 = 0x4000
}

/// Parses what a read of a fanotify descriptor returned. The only code that reads fanotify's raw
/// records: fields are loaded unaligned, and every length is checked against the bytes read, so a
/// record that does not fit is reported as possible loss, never read past.
enum FanotifyEventParser {
    /// The metadata's fixed part: `event_len`, `vers`, `reserved`, `metadata_len`, `mask`, `fd`, `pid`.
    static let metadataSize = 24
    /// `FANOTIFY_METADATA_VERSION`.
    static let version: UInt8 = 3

    enum InfoType {
        static let object: UInt8 = 1
        static let directoryAndName: UInt8 = 2
        static let oldDirectoryAndName: UInt8 = 10
        static let newDirectoryAndName: UInt8 = 12
    }

    struct Parsed {
        var events: [FanotifyEvent] = []
        /// The read held something that is no record this parser knows how to read: treated as
        /// an overflow (possible loss) by the caller.
        var isMalformed = false
        /// Descriptors the kernel opened for events (none in this reporting mode, but a
        /// descriptor it gave is the reader's to close).
        var descriptors: [Int32] = []
    }

    static func parse(_ buffer: UnsafeRawBufferPointer) -> Parsed {
        var parsed = Parsed()
        // The events of a read come mostly from one directory: its handle is made once.
        var previous: KernelHandle?
        // One copy of the read for every name in it.
        let storage = Array(buffer)
        var offset = 0
        while offset < buffer.count {
            guard buffer.count - offset >= metadataSize else {
                parsed.isMalformed = true
                break
            }
            let length = Int(buffer.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
            let version = buffer[offset + 4]
            let metadataLength = Int(buffer.loadUnaligned(fromByteOffset: offset + 6, as: UInt16.self))
            guard version == Self.version, metadataLength >= metadataSize, length >= metadataLength,
                length <= buffer.count - offset
            else {
                parsed.isMalformed = true
                break
            }
            var event = FanotifyEvent(mask: buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
            event.storage = storage
            let fd = buffer.loadUnaligned(fromByteOffset: offset + 16, as: Int32.self)
            if fd >= 0 { parsed.descriptors.append(fd) }
            let record = UnsafeRawBufferPointer(rebasing: buffer[(offset + metadataLength)..<(offset + length)])
            let start = offset + metadataLength
            if !parseInformation(record, at: start, into: &event, previous: &previous) { parsed.isMalformed = true }
            parsed.events.append(event)
            offset += length
        }
        return parsed
    }

    /// Reads an event's information records; false when one does not fit.
    /// `start`: where `records` begins in the read (the names' ranges are offsets into it).
    private static func parseInformation(
        _ records: UnsafeRawBufferPointer, at start: Int, into event: inout FanotifyEvent,
        previous: inout KernelHandle?
    ) -> Bool {
        var offset = 0
        while offset < records.count {
            guard records.count - offset >= 4 else { return false }
            let type = records[offset]
            let length = Int(records.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self))
            guard length >= 4, length <= records.count - offset else { return false }
            let record = UnsafeRawBufferPointer(rebasing: records[offset..<(offset + length)])
            switch type {
            case InfoType.directoryAndName, InfoType.oldDirectoryAndName:
                guard let (handle, name) = handle(record, named: true, previous: &previous) else { return false }
                event.directory = handle
                event.nameRange = (start + offset + name.lowerBound)..<(start + offset + name.upperBound)
            case InfoType.newDirectoryAndName:
                guard let (handle, name) = handle(record, named: true, previous: &previous) else { return false }
                event.newDirectory = handle
                event.newNameRange = (start + offset + name.lowerBound)..<(start + offset + name.upperBound)
            case InfoType.object:
                // Read only where it is used: a directory's creation (the router knows the new
                // directory by it) and a rename (an exchange's halves move two entries, a rename
                // and its way back one). Every other record's copy would cost an allocation an
                // event.
                let creation = UInt64(EventMask.create) | FanotifyMask.onDirectory
                guard event.mask & creation == creation || event.mask & FanotifyMask.rename != 0 else { break }
                var unshared: KernelHandle?
                guard let handle = handle(record, named: false, previous: &unshared) else { return false }
                event.object = handle.0
            default:
                break  // records not asked for
            }
            offset += length
        }
        return true
    }

    /// A record of a handle, followed by a name and its NUL when `named`: a 4-byte header, the
    /// file system's 8-byte id, `struct file_handle` (`handle_bytes`, `handle_type`, the bytes),
    /// then the name, whose range in the record is returned. The handle is `previous` when its
    /// bytes are the same, and becomes it.
    private static func handle(
        _ record: UnsafeRawBufferPointer, named: Bool, previous: inout KernelHandle?
    ) -> (KernelHandle, Range<Int>)? {
        let handleStart = 4 + 8
        guard record.count >= handleStart + 8 else { return nil }
        let handleLength = Int(record.loadUnaligned(fromByteOffset: handleStart, as: UInt32.self))
        let type = record.loadUnaligned(fromByteOffset: handleStart + 4, as: Int32.self)
        let bytesStart = handleStart + 8
        guard handleLength <= record.count - bytesStart else { return nil }
        let nameStart = bytesStart + handleLength
        let id = UnsafeRawBufferPointer(rebasing: record[4..<handleStart])
        let bytes = UnsafeRawBufferPointer(rebasing: record[bytesStart..<nameStart])
        let handle: KernelHandle
        if let previous, previous.matches(fileSystemID: id, type: type, bytes: bytes) {
            handle = previous
        } else {
            handle = KernelHandle(fileSystemID: id, type: type, bytes: bytes)
            previous = handle
        }
        guard named else { return (handle, 0..<0) }
        let rest = UnsafeRawBufferPointer(rebasing: record[nameStart...])
        guard !rest.isEmpty, let nul = memchr(rest.baseAddress!, 0, rest.count) else { return nil }
        let length = rest.baseAddress!.distance(to: UnsafeRawPointer(nul))
        return (handle, nameStart..<(nameStart + length))
    }
}
