import Glibc

/// Parses what a read of a fanotify descriptor returned. The only code that reads fanotify's raw
/// records (``MarkEvent`` reads its handles where this checked them): fields are loaded
/// unaligned, and every length is checked against the bytes read, so a record that does not fit
/// is reported as possible loss, never read past.
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
        var events: [MarkEvent] = []
        /// The read held something that is no record this parser knows how to read: treated as
        /// an overflow (possible loss) by the caller.
        var isMalformed = false
        /// Descriptors the kernel opened for events (none in this reporting mode, but a
        /// descriptor it gave is the reader's to close).
        var descriptors: [Int32] = []
    }

    static func parse(_ buffer: UnsafeRawBufferPointer) -> Parsed {
        var parsed = Parsed()
        var storage: [UInt8] = []
        parsed.isMalformed = parse(
            buffer, copyingInto: &storage, appendingTo: &parsed.events, descriptors: &parsed.descriptors)
        return parsed
    }

    /// Appends the records of `buffer` to `events`, each reading its handles and names in one
    /// copy of the whole read in `storage`, and the descriptors the kernel opened to
    /// `descriptors`; returns whether the read held something that is no record this parser
    /// reads (``Parsed/isMalformed``). The event loop passes the same arrays at every read,
    /// emptied: they allocate nothing again unless a record of an earlier read is still held
    /// (its copy is then not written over, but replaced), as for inotify's
    /// (``InotifyEventParser/parse(_:copyingInto:appendingTo:)``).
    static func parse(
        _ buffer: UnsafeRawBufferPointer, copyingInto storage: inout [UInt8], appendingTo events: inout [MarkEvent],
        descriptors: inout [Int32]
    ) -> Bool {
        var isMalformed = false
        storage.replaceSubrange(storage.startIndex..<storage.endIndex, with: buffer)
        // No record is shorter than its metadata and one handle with a name: the array is not
        // grown (and its records moved) as they are read.
        let fewest = buffer.count / (metadataSize + 4 + 8 + 8 + 2)
        if events.capacity - events.count < fewest { events.reserveCapacity(events.count + fewest) }
        var offset = 0
        while offset < buffer.count {
            guard buffer.count - offset >= metadataSize else {
                isMalformed = true
                break
            }
            let length = Int(buffer.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
            let version = buffer[offset + 4]
            let metadataLength = Int(buffer.loadUnaligned(fromByteOffset: offset + 6, as: UInt16.self))
            guard version == Self.version, metadataLength >= metadataSize, length >= metadataLength,
                length <= buffer.count - offset
            else {
                isMalformed = true
                break
            }
            let mask = buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)
            let fd = buffer.loadUnaligned(fromByteOffset: offset + 16, as: Int32.self)
            if fd >= 0 { descriptors.append(fd) }
            let start = offset + metadataLength
            let record = UnsafeRawBufferPointer(rebasing: buffer[start..<(offset + length)])
            var handles = MarkEvent.Handles()
            if !parseInformation(record, at: start, mask: mask, into: &handles) {
                isMalformed = true
            }
            // Made in one piece from plain offsets: nothing reference-counted is copied.
            events.append(MarkEvent(mask: mask, sharing: storage, at: handles))
            offset += length
        }
        return isMalformed
    }

    /// Reads an event's information records, where its handles and names are; false when one
    /// does not fit. `start`: where `records` begins in the read (the offsets are into it).
    private static func parseInformation(
        _ records: UnsafeRawBufferPointer, at start: Int, mask: UInt64, into handles: inout MarkEvent.Handles
    ) -> Bool {
        var offset = 0
        while offset < records.count {
            guard records.count - offset >= 4 else { return false }
            let type = records[offset]
            let length = Int(records.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self))
            guard length >= 4, length <= records.count - offset else { return false }
            let record = UnsafeRawBufferPointer(rebasing: records[offset..<(offset + length)])
            let at = start + offset
            switch type {
            case InfoType.directoryAndName, InfoType.oldDirectoryAndName:
                guard let name = handle(record, named: true) else { return false }
                handles.directory = at + 4
                handles.name = (at + name.lowerBound)..<(at + name.upperBound)
            case InfoType.newDirectoryAndName:
                guard let name = handle(record, named: true) else { return false }
                handles.newDirectory = at + 4
                handles.newName = (at + name.lowerBound)..<(at + name.upperBound)
            case InfoType.object:
                // Kept only where it is used: a directory's creation (the router knows the new
                // directory by it) and a rename (an exchange's halves move two entries, a rename
                // and its way back one).
                let creation = UInt64(EventMask.create) | MarkBits.onDirectory
                guard mask & creation == creation || mask & MarkBits.rename != 0 else { break }
                guard handle(record, named: false) != nil else { return false }
                handles.object = at + 4
            default:
                break  // records not asked for
            }
            offset += length
        }
        return true
    }

    /// Checks a record of a handle, followed by a name and its NUL when `named`: a 4-byte header,
    /// the file system's 8-byte id, `struct file_handle` (`handle_bytes`, `handle_type`, the
    /// bytes), then the name, whose range in the record is returned (empty when not `named`); nil
    /// when it does not fit. The handle is read where it is (``MarkEvent``), from offset 4.
    private static func handle(_ record: UnsafeRawBufferPointer, named: Bool) -> Range<Int>? {
        let handleStart = 4 + 8
        guard record.count >= handleStart + 8 else { return nil }
        let handleLength = Int(record.loadUnaligned(fromByteOffset: handleStart, as: UInt32.self))
        let bytesStart = handleStart + 8
        guard handleLength <= record.count - bytesStart else { return nil }
        let nameStart = bytesStart + handleLength
        guard named else { return 0..<0 }
        let rest = UnsafeRawBufferPointer(rebasing: record[nameStart...])
        guard !rest.isEmpty, let nul = memchr(rest.baseAddress!, 0, rest.count) else { return nil }
        let length = rest.baseAddress!.distance(to: UnsafeRawPointer(nul))
        return nameStart..<(nameStart + length)
    }
}
