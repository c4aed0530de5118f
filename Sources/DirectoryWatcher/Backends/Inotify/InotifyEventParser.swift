import Glibc

/// Parses the bytes one `read` of an inotify descriptor returned.
///
/// This is the library's only code that reads raw event memory. A record is a 16-byte header
/// (`wd`, `mask`, `cookie`, `len`, native endian) followed by `len` bytes of NUL-padded name.
/// Records are variable length, so every field is loaded unaligned and every length is checked
/// against the bytes actually present before it is used.
enum InotifyEventParser {
    static let headerSize = 16

    struct Result: Equatable {
        var events: [BackendEvent]
        /// Bytes at the end that did not form a whole record (0 for anything the kernel writes).
        var malformedTrailingBytes: Int
    }

    static func parse(_ bytes: UnsafeRawBufferPointer) -> Result {
        var storage: [UInt8] = []
        var events: [BackendEvent] = []
        let malformed = parse(bytes, copyingInto: &storage, appendingTo: &events)
        return Result(events: events, malformedTrailingBytes: malformed)
    }

    /// Appends the records of `bytes` to `events`, each event's name a slice of one copy of the
    /// whole read in `storage` (one allocation per read rather than one per name); returns the
    /// bytes at the end that did not form a whole record. The event loop passes the same two
    /// arrays at every read, emptied: they allocate nothing again unless an event of an earlier
    /// read is still held (for rename pairing, it keeps its read's copy alive while it waits;
    /// the copy is then not written over, but replaced).
    static func parse(
        _ bytes: UnsafeRawBufferPointer, copyingInto storage: inout [UInt8], appendingTo events: inout [BackendEvent]
    ) -> Int {
        // One call where emptying and appending were two, each through the standard library's
        // general code.
        storage.replaceSubrange(storage.startIndex..<storage.endIndex, with: bytes)
        // A record takes at least a header: room for that many needs no count of them first
        // (the loop's array keeps its capacity from read to read).
        if events.capacity - events.count < bytes.count / headerSize {
            events.reserveCapacity(events.count + recordCount(bytes))
        }
        var offset = 0
        while bytes.count - offset >= headerSize {
            let wd = bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let cookie = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameStart = offset + headerSize
            guard length <= bytes.count - nameStart else { break }
            let nameEnd = nameStart + nameLength(bytes, from: nameStart, upTo: length)
            events.append(
                BackendEvent(wd: wd, mask: mask, cookie: cookie, nameIn: storage, at: nameStart..<nameEnd))
            offset = nameStart + length
        }
        return bytes.count - offset
    }

    /// The name's length: up to its first NUL, or all `length` bytes when none pads it.
    private static func nameLength(_ bytes: UnsafeRawBufferPointer, from start: Int, upTo length: Int) -> Int {
        guard length > 0, let base = bytes.baseAddress else { return 0 }
        guard let nul = memchr(base + start, 0, length) else { return length }
        return UnsafeRawPointer(nul) - (base + start)
    }

    /// How many whole records `bytes` holds, from their headers alone, so that the events array
    /// is allocated once rather than grown a dozen times for a full read.
    private static func recordCount(_ bytes: UnsafeRawBufferPointer) -> Int {
        var count = 0
        var offset = 0
        while bytes.count - offset >= headerSize {
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            guard length <= bytes.count - offset - headerSize else { break }
            count += 1
            offset += headerSize + length
        }
        return count
    }
}
