import Glibc

/// Parses the bytes one `getdents64` call returned: the entries of a directory, as the kernel
/// lists them.
///
/// With the inotify parser, the library's only code that reads raw kernel records. A record is
/// `linux_dirent64`: the inode (8 bytes), an offset (8), the record's length (2), the type (1),
/// then the name, NUL-terminated and padded to the record's length. Every field is loaded
/// unaligned and every length checked against the bytes present before it is used.
enum DirectoryEntryParser {
    static let headerSize = 19

    /// The kind a listing's `d_type` says; nil for `DT_UNKNOWN` (the file system does not say).
    static func kind(_ type: UInt8) -> EntryStatus.Kind? {
        switch Int32(type) {
        case Int32(DT_UNKNOWN): return nil
        case Int32(DT_DIR): return .directory
        case Int32(DT_REG): return .file
        case Int32(DT_LNK): return .symbolicLink
        default: return .other
        }
    }

    struct Entry: Equatable {
        var name: [UInt8]
        var inode: UInt64
        /// `DT_REG`, `DT_DIR`, … or `DT_UNKNOWN` when the file system does not say.
        var type: UInt8
    }

    struct Result: Equatable {
        /// Every entry but `.` and `..`.
        var entries: [Entry]
        /// Bytes at the end that did not form a whole record (0 for anything the kernel writes).
        var malformedTrailingBytes: Int
    }

    static func parse(_ bytes: UnsafeRawBufferPointer) -> Result {
        var entries: [Entry] = []
        let malformed = forEach(bytes) { name, inode, type in
            entries.append(Entry(name: [UInt8](name), inode: inode, type: type))
        }
        return Result(entries: entries, malformedTrailingBytes: malformed)
    }

    /// Calls `body` with each entry but `.` and `..`: its name's bytes (valid during the call
    /// only: no copy is made), inode and type. Returns the bytes at the end that did not form a
    /// whole record.
    @discardableResult
    static func forEach(
        _ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer, UInt64, UInt8) -> Void
    ) -> Int {
        var offset = 0
        while bytes.count - offset >= headerSize {
            let inode = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt16.self))
            let type = bytes.load(fromByteOffset: offset + 18, as: UInt8.self)
            guard length > headerSize, length <= bytes.count - offset else { break }
            let nameStart = offset + headerSize
            let room = length - headerSize
            let start = bytes.baseAddress! + nameStart
            let nameLength = memchr(start, 0, room).map { UnsafeRawPointer($0) - start } ?? room
            let name = UnsafeRawBufferPointer(start: start, count: nameLength)
            let isDot = nameLength == 1 && name[0] == 0x2E
            let isDotDot = nameLength == 2 && name[0] == 0x2E && name[1] == 0x2E
            if !isDot && !isDotDot { body(name, inode, type) }
            offset += length
        }
        return bytes.count - offset
    }
}
