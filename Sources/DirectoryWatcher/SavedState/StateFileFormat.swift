import CDirectoryWatcherShims

/// The saved state's file format, version 1 (Docs: <doc:SavedState>).
///
/// ```
/// "DWSTATE\n"                 8 bytes
/// version                     u32, little-endian: 1
/// root                        the watched directory's absolute path: varint length, bytes
/// directory count             varint
/// each directory:
///   path below the root       varint length, bytes (empty for the root)
///   inode                     u64 (0 for the root)
///   entry count               varint
///   each entry:
///     tag                     u8: 0 a status read by statx, 1 what events said (no status)
///     name                    varint length, bytes
///     tag 0: device u64, inode u64, size varint, modified seconds i64 and nanoseconds u32,
///            changed i64 and born i64 (nanoseconds since 1970; born i64.min: none),
///            owner varint, group varint, mode varint
///     tag 1: flags u8 (1 directory, 2 only its creation told, 4 inode read by a listing),
///            since seconds i64 and nanoseconds u32, inode u64, born-by seconds i64 and
///            nanoseconds u32
/// checksum                    u32, little-endian: CRC-32C of every byte before it
/// ```
///
/// Fixed-width fields are little-endian; a varint is LEB128 (7 bits a byte, low first). An entry
/// takes its name with its length, and 34 bytes (tag 1) or 49 to 68 (tag 0).
enum StateFileFormat {
    static let magic = Array("DWSTATE\n".utf8)
    static let version: UInt32 = 1

    /// Why a file is not a state this watcher can start from.
    enum Problem: Error, Equatable, CustomStringConvertible {
        case notAState
        case version(UInt32)
        case truncated
        case checksum
        case malformed(String)
        case anotherDirectory(FileSystemPath)

        var description: String {
            switch self {
            case .notAState: return "not a saved state (no DWSTATE header)"
            case .version(let version):
                return
                    "a saved state of format version \(version); this library reads version \(StateFileFormat.version)"
            case .truncated: return "the file is truncated"
            case .checksum: return "the checksum does not match: the file is corrupt"
            case .malformed(let what): return "the file is corrupt (\(what))"
            case .anotherDirectory(let root): return "the state of another directory, \(root)"
            }
        }
    }

    // MARK: - Writing

    static func encode(_ saved: SavedDirectories) -> [UInt8] {
        var out: [UInt8] = []
        var capacity = 64 + saved.root.bytes.count
        for directory in saved.directories { capacity += 32 + directory.path.count + directory.entries.count * 64 }
        out.reserveCapacity(capacity)
        out += magic
        put32(version, &out)
        putBytes(saved.root.bytes[...], &out)
        putVarint(UInt64(saved.directories.count), &out)
        for directory in saved.directories {
            putBytes(directory.path[...], &out)
            put64(directory.inode, &out)
            putVarint(UInt64(directory.entries.count), &out)
            directory.entries.forEach { name, known in
                switch known {
                case .entry(let status):
                    out.append(0)
                    putBytes(name, &out)
                    put64(status.device, &out)
                    put64(status.inode, &out)
                    putVarint(UInt64(bitPattern: status.size), &out)
                    putTime(status.modified, &out)
                    let times = status.storedTimes
                    put64(UInt64(bitPattern: times.changed), &out)
                    put64(UInt64(bitPattern: times.born), &out)
                    putVarint(UInt64(status.owner), &out)
                    putVarint(UInt64(status.group), &out)
                    putVarint(UInt64(status.mode), &out)
                case .unsure(let unsure):
                    out.append(1)
                    putBytes(name, &out)
                    out.append(
                        (unsure.isDirectory ? 1 : 0) | (unsure.createdOnly ? 2 : 0) | (unsure.isListed ? 4 : 0))
                    putTime(unsure.since, &out)
                    put64(unsure.inode, &out)
                    putTime(unsure.bornBy, &out)
                }
            }
        }
        put32(CRC32C.checksum(out[...]), &out)
        return out
    }

    private static func put32(_ value: UInt32, _ out: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
    }

    private static func put64(_ value: UInt64, _ out: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
    }

    private static func putVarint(_ value: UInt64, _ out: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
    }

    private static func putBytes(_ bytes: ArraySlice<UInt8>, _ out: inout [UInt8]) {
        putVarint(UInt64(bytes.count), &out)
        out.append(contentsOf: bytes)
    }

    private static func putTime(_ time: Snapshot.Time, _ out: inout [UInt8]) {
        put64(UInt64(bitPattern: time.seconds), &out)
        put32(time.nanoseconds, &out)
    }

    // MARK: - Reading

    /// The state in `bytes`, which must be `root`'s.
    static func decode(_ bytes: [UInt8], expectingRoot root: FileSystemPath) throws(Problem) -> SavedDirectories {
        try check(bytes, expectingRoot: root)
        return try decodeChecked(bytes)
    }

    /// Whether `bytes` can be a state of `root`: its header, its version, its checksum and its
    /// root, without reading its directories (a start checks this before it watches, and reads
    /// the directories while it lists).
    static func check(_ bytes: [UInt8], expectingRoot root: FileSystemPath) throws(Problem) {
        guard bytes.count >= magic.count, bytes[..<magic.count].elementsEqual(magic) else {
            // A file cut inside its header is a truncated state, not a foreign file.
            if bytes.count < magic.count && magic.starts(with: bytes) { throw .truncated }
            throw .notAState
        }
        var reader = Reader(bytes: bytes, at: magic.count)
        let version = try reader.u32()
        guard version == Self.version else { throw .version(version) }
        guard bytes.count >= magic.count + 8 else { throw .truncated }
        var stored = Reader(bytes: bytes, at: bytes.count - 4)
        let intact = CRC32C.checksum(bytes[..<(bytes.count - 4)]) == (try stored.u32())
        reader.end = bytes.count - 4
        guard intact else {
            // The last four bytes of a file cut short are not its checksum, and the body read
            // without them runs out (truncated); one changed in place reads, or not, and fails
            // the checksum (corrupt).
            do throws(Problem) {
                _ = try readBody(&reader)
            } catch {
                if error == .truncated { throw .truncated }
            }
            throw .checksum
        }
        let savedRoot = try reader.slice()
        guard savedRoot.elementsEqual(root.bytes) else { throw .anotherDirectory(FileSystemPath(bytes: savedRoot)) }
    }

    /// The state in `bytes`, which ``check(_:expectingRoot:)`` has passed: a body that does not
    /// parse has a valid checksum, and is malformed (the writer's fault, not the disk's).
    static func decodeChecked(_ bytes: [UInt8]) throws(Problem) -> SavedDirectories {
        var reader = Reader(bytes: bytes, at: magic.count + 4)
        reader.end = bytes.count - 4
        do throws(Problem) {
            return try readBody(&reader)
        } catch {
            if case .malformed = error { throw error }
            throw .malformed("\(error), with a valid checksum")
        }
    }

    /// The fewest bytes a directory takes: an empty path, the inode, a count of none.
    static let smallestDirectory = 1 + 8 + 1
    /// The fewest bytes an entry takes: tag 1 with a one-byte name (flags, two times, the inode).
    /// A count is checked against the bytes left with these, so that a damaged one cannot ask for
    /// room without bound; a larger figure would refuse a good state of many small entries.
    static let smallestEntry = 1 + 2 + 1 + 12 + 8 + 12

    private static func readBody(_ reader: inout Reader) throws(Problem) -> SavedDirectories {
        let savedRoot = FileSystemPath(bytes: try reader.array())
        var saved = SavedDirectories(root: savedRoot)
        let directories = try reader.count(atLeast: smallestDirectory)
        saved.directories.reserveCapacity(directories)
        for _ in 0..<directories {
            let path = try reader.array()
            let inode = try reader.u64()
            let count = try reader.count(atLeast: smallestEntry)
            var entries = NameTable<KnownDirectory.Known>(minimumCapacity: count)
            for _ in 0..<count {
                let tag = try reader.u8()
                let name = try reader.slice()
                guard !name.isEmpty, !name.contains(0), !name.contains(UInt8(ascii: "/")) else {
                    throw .malformed("an entry's name is empty or holds a slash or a NUL")
                }
                let known: KnownDirectory.Known
                switch tag {
                case 0:
                    let device = try reader.u64()
                    let inode = try reader.u64()
                    let size = Int64(bitPattern: try reader.varint())
                    let modified = try reader.time()
                    let changed = Int64(bitPattern: try reader.u64())
                    let born = Int64(bitPattern: try reader.u64())
                    let owner = try reader.varint()
                    let group = try reader.varint()
                    let mode = try reader.varint()
                    guard owner <= UInt32.max, group <= UInt32.max, mode <= UInt16.max else {
                        throw .malformed("an owner, group or mode out of range")
                    }
                    known = .entry(
                        EntryStatus(
                            device: device, inode: inode, size: size, modified: modified, changedNanoseconds: changed,
                            bornNanoseconds: born, owner: UInt32(owner), group: UInt32(group), mode: UInt16(mode)))
                case 1:
                    let flags = try reader.u8()
                    let since = try reader.time()
                    let inode = try reader.u64()
                    let bornBy = try reader.time()
                    known = .unsure(
                        KnownDirectory.Unsure(
                            isDirectory: flags & 1 != 0, since: since, createdOnly: flags & 2 != 0, inode: inode,
                            bornBy: bornBy, isListed: flags & 4 != 0))
                default:
                    throw .malformed("an entry of unknown kind \(tag)")
                }
                guard entries.updateValue(known, forName: name) == nil else {
                    throw .malformed("a name listed twice in one directory")
                }
            }
            saved.directories.append(SavedDirectories.Directory(path: path, inode: inode, entries: entries))
        }
        guard reader.isAtEnd else { throw .malformed("bytes after the last directory") }
        return saved
    }

    /// Reads fields in order, each checked against the end.
    private struct Reader {
        let bytes: [UInt8]
        var index: Int
        var end: Int

        init(bytes: [UInt8], at index: Int) {
            self.bytes = bytes
            self.index = index
            self.end = bytes.count
        }

        var isAtEnd: Bool { index == end }

        private mutating func take(_ count: Int) throws(Problem) -> Range<Int> {
            guard count >= 0, end - index >= count else { throw .truncated }
            defer { index += count }
            return index..<(index + count)
        }

        mutating func u8() throws(Problem) -> UInt8 { bytes[try take(1).lowerBound] }

        mutating func u32() throws(Problem) -> UInt32 {
            let offset = try take(4).lowerBound
            return UInt32(
                littleEndian: bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) })
        }

        mutating func u64() throws(Problem) -> UInt64 {
            let offset = try take(8).lowerBound
            return UInt64(
                littleEndian: bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self) })
        }

        mutating func varint() throws(Problem) -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let byte = try u8()
                guard shift < 64 else { throw .malformed("a number too long") }
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
        }

        /// A count of records that take at least `size` bytes each, checked against what is left.
        mutating func count(atLeast size: Int) throws(Problem) -> Int {
            let value = try varint()
            guard value <= UInt64(end - index) / UInt64(size) + 1 else { throw .truncated }
            return Int(value)
        }

        mutating func slice() throws(Problem) -> ArraySlice<UInt8> {
            let length = try varint()
            guard length <= UInt64(end - index) else { throw .truncated }
            return bytes[try take(Int(length))]
        }

        mutating func array() throws(Problem) -> [UInt8] { Array(try slice()) }

        mutating func time() throws(Problem) -> Snapshot.Time {
            let seconds = Int64(bitPattern: try u64())
            let nanoseconds = try u32()
            guard nanoseconds < 1_000_000_000 else { throw .malformed("a time with more than a second of nanoseconds") }
            return Snapshot.Time(seconds: seconds, nanoseconds: nanoseconds)
        }
    }
}

/// CRC-32C (Castagnoli), the checksum of ext4's and btrfs's metadata: the processor's crc32
/// instruction where it has one (a state of 100,000 entries checked in well under a millisecond,
/// where a table a byte at a time took over ten).
enum CRC32C {
    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        bytes.withUnsafeBytes { cdw_crc32c(0, $0.baseAddress, $0.count) }
    }
}
