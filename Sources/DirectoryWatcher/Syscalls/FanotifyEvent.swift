/// A file handle as fanotify names a directory: the file system's id, the handle's type and its
/// bytes, kept end to end as one key (the router's table from handle to directory hashes it once
/// per event).
struct KernelHandle: Hashable, Sendable {
    /// The 8 bytes of the file system's id, the handle's type (4 bytes, little-endian), the handle.
    let key: [UInt8]

    init(key: [UInt8]) { self.key = key }

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
    /// name; "." for an event about the directory itself. Nil for an overflow, or an event about a
    /// file that no directory holds any more (reported by its own handle alone).
    var directory: KernelHandle?
    var name: [UInt8] = []
    /// For `FAN_RENAME`: the directory the entry went to, and its name there.
    var newDirectory: KernelHandle?
    var newName: [UInt8] = []
    /// The handle of the object itself (the entry, for an event about a name), when the kernel
    /// gives it (`FAN_REPORT_TARGET_FID`, since 5.17).
    var object: KernelHandle?

    var isOverflow: Bool { mask & FanotifyMask.queueOverflow != 0 }
    var isRename: Bool { mask & FanotifyMask.rename != 0 }
    var isDirectory: Bool { mask & FanotifyMask.onDirectory != 0 }
    /// An event about the directory itself rather than an entry of it.
    var isAboutDirectoryItself: Bool { name == [UInt8(ascii: ".")] }
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
            let fd = buffer.loadUnaligned(fromByteOffset: offset + 16, as: Int32.self)
            if fd >= 0 { parsed.descriptors.append(fd) }
            let record = UnsafeRawBufferPointer(rebasing: buffer[(offset + metadataLength)..<(offset + length)])
            if !parseInformation(record, into: &event) { parsed.isMalformed = true }
            parsed.events.append(event)
            offset += length
        }
        return parsed
    }

    /// Reads an event's information records; false when one does not fit.
    private static func parseInformation(_ records: UnsafeRawBufferPointer, into event: inout FanotifyEvent) -> Bool {
        var offset = 0
        while offset < records.count {
            guard records.count - offset >= 4 else { return false }
            let type = records[offset]
            let length = Int(records.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self))
            guard length >= 4, length <= records.count - offset else { return false }
            let record = UnsafeRawBufferPointer(rebasing: records[offset..<(offset + length)])
            switch type {
            case InfoType.directoryAndName, InfoType.oldDirectoryAndName:
                guard let (handle, name) = directoryAndName(record) else { return false }
                event.directory = handle
                event.name = name
            case InfoType.newDirectoryAndName:
                guard let (handle, name) = directoryAndName(record) else { return false }
                event.newDirectory = handle
                event.newName = name
            case InfoType.object:
                guard let handle = handle(record, named: false) else { return false }
                event.object = handle.0
            default:
                break  // records not asked for
            }
            offset += length
        }
        return true
    }

    /// A record of a directory's handle and a name: a 4-byte header, the file system's 8-byte id,
    /// `struct file_handle` (`handle_bytes`, `handle_type`, the bytes), then the name and its NUL.
    private static func directoryAndName(_ record: UnsafeRawBufferPointer) -> (KernelHandle, [UInt8])? {
        handle(record, named: true)
    }

    /// A record of a handle, followed by a name and its NUL when `named`.
    private static func handle(_ record: UnsafeRawBufferPointer, named: Bool) -> (KernelHandle, [UInt8])? {
        let handleStart = 4 + 8
        guard record.count >= handleStart + 8 else { return nil }
        let handleLength = Int(record.loadUnaligned(fromByteOffset: handleStart, as: UInt32.self))
        let type = record.loadUnaligned(fromByteOffset: handleStart + 4, as: Int32.self)
        let bytesStart = handleStart + 8
        guard handleLength <= record.count - bytesStart else { return nil }
        let nameStart = bytesStart + handleLength
        let handle = KernelHandle(
            fileSystemID: record[4..<handleStart], type: type, bytes: record[bytesStart..<nameStart])
        guard named else { return (handle, []) }
        guard let nul = record[nameStart...].firstIndex(of: 0) else { return nil }
        return (handle, Array(record[nameStart..<nul]))
    }
}
