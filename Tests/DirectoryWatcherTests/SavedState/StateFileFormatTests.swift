import CDirectoryWatcherShims
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The state file's format, without the kernel: what is written reads back the same, and every
/// damage is named.
final class StateFileFormatTests: XCTestCase {
    private let root = FileSystemPath("/srv/watched")

    private func sample() -> SavedDirectories {
        var entries = NameTable<KnownDirectory.Known>()
        let status = EntryStatus(
            device: 2049, inode: 77, size: 1 << 40, modified: .init(seconds: -5, nanoseconds: 999_999_999),
            changedNanoseconds: 1_700_000_000_123_456_789, bornNanoseconds: .min, owner: 1000, group: 4_000_000_000,
            mode: 0o100644)
        entries.updateValue(.entry(status), forName: Array("file.txt".utf8)[...])
        entries.updateValue(
            .unsure(
                KnownDirectory.Unsure(
                    isDirectory: true, since: .init(seconds: 1_700_000_000, nanoseconds: 5), createdOnly: true,
                    inode: 9,
                    bornBy: .unvouched, isListed: true)), forName: [0xFF, 0x41][...])
        var saved = SavedDirectories(root: root)
        saved.directories = [
            .init(path: [], inode: 0, entries: entries),
            .init(path: Array("a/b".utf8), inode: 12, entries: NameTable()),
        ]
        return saved
    }

    private func decoded(_ bytes: [UInt8]) throws(StateFileFormat.Problem) -> SavedDirectories {
        try StateFileFormat.decode(bytes, expectingRoot: root)
    }

    func testAStateReadsBackAsItWasWritten() throws {
        let saved = sample()
        let read = try decoded(StateFileFormat.encode(saved))
        XCTAssertEqual(read.root, saved.root)
        XCTAssertEqual(read.directories.map(\.path), saved.directories.map(\.path))
        XCTAssertEqual(read.directories.map(\.inode), saved.directories.map(\.inode))
        for (a, b) in zip(read.directories, saved.directories) {
            XCTAssertEqual(a.entries.dictionary(), b.entries.dictionary())
        }
    }

    /// The smallest records there are, many of them: one-byte names known by events alone, and
    /// directories with no entries. A count is checked against the bytes left (a damaged count
    /// must not allocate without bound), and that check must take each record's least size.
    func testManyOfTheSmallestRecordsReadBack() throws {
        for count in [1, 8, 9, 50, 300] {
            var entries = NameTable<KnownDirectory.Known>()
            for index in 0..<count {
                let name = index < 128 ? [UInt8(0x80 + index)] : Array("n\(index)".utf8)
                entries.updateValue(
                    .unsure(
                        KnownDirectory.Unsure(
                            isDirectory: false, since: .init(seconds: 1, nanoseconds: 0), createdOnly: false, inode: 0,
                            bornBy: .unvouched, isListed: false)), forName: name[...])
            }
            var saved = SavedDirectories(root: root)
            saved.directories = (0..<count).map { _ in .init(path: [], inode: 0, entries: NameTable()) }
            saved.directories.append(.init(path: Array("d".utf8), inode: 3, entries: entries))
            let read = try decoded(StateFileFormat.encode(saved))
            XCTAssertEqual(read.directories.count, count + 1, "\(count) directories")
            XCTAssertEqual(
                read.directories.last?.entries.dictionary(), entries.dictionary(), "\(count) entries")
        }
    }

    func testTheFileIsTheNamesAndAFewWordsPerEntry() {
        let bytes = StateFileFormat.encode(sample())
        let names = "file.txt".utf8.count + 2
        XCTAssertLessThan(bytes.count, 8 + 4 + 14 + 1 + 2 * 12 + names + 2 * 56 + 4)
    }

    func testEveryDamageIsNamed() {
        let good = StateFileFormat.encode(sample())
        func problem(_ bytes: [UInt8], root: FileSystemPath? = nil) -> StateFileFormat.Problem? {
            do {
                _ = try StateFileFormat.decode(bytes, expectingRoot: root ?? self.root)
                return nil
            } catch {
                return error
            }
        }
        XCTAssertNil(problem(good))
        XCTAssertEqual(problem([]), .truncated)
        XCTAssertEqual(problem(Array(good[..<5])), .truncated)
        XCTAssertEqual(problem(Array("#!/bin/sh\n".utf8)), .notAState)
        for cut in [12, good.count / 2, good.count - 1] {
            XCTAssertEqual(problem(Array(good[..<cut])), .truncated, "cut at \(cut)")
        }
        var flipped = good
        flipped[good.count - 10] ^= 1
        XCTAssertEqual(problem(flipped), .checksum)
        var version = good
        version[8] = 2
        XCTAssertEqual(problem(version), .version(2))
        XCTAssertEqual(problem(good, root: "/elsewhere"), .anotherDirectory(root))
    }

    /// The check value of CRC-32C (RFC 3720's): what another reader of the format computes. The
    /// processor's instruction and the portable tables agree at every length and alignment.
    func testTheChecksumIsCRC32COnEveryPath() {
        XCTAssertEqual(CRC32C.checksum(Array("123456789".utf8)[...]), 0xE306_9283)
        XCTAssertEqual(CRC32C.checksum([][...]), 0)
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<1_100).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes.withUnsafeBytes { buffer in
            for start in 0..<9 {
                for length in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 255, 1_000] {
                    let part = UnsafeRawBufferPointer(rebasing: buffer[start..<(start + length)])
                    XCTAssertEqual(
                        cdw_crc32c(0, part.baseAddress, part.count),
                        cdw_crc32c_portable(0, part.baseAddress, part.count),
                        "start \(start), length \(length)")
                }
            }
        }
        // A checksum continued over two parts is the checksum of the whole.
        let first = cdw_crc32c(0, bytes, 500)
        let whole = bytes.withUnsafeBytes { cdw_crc32c(0, $0.baseAddress, $0.count) }
        let continued = bytes.withUnsafeBytes { cdw_crc32c(first, $0.baseAddress! + 500, $0.count - 500) }
        XCTAssertEqual(continued, whole)
    }

    /// A body that passes the checksum and does not parse was written wrong, not damaged: the
    /// check before watching passes it, and its decoding names it malformed.
    func testABodyThatPassesTheChecksumButDoesNotParseIsMalformed() throws {
        var bytes = StateFileFormat.encode(sample())
        // The first entry's tag, made unknown: after the header, the root, the directory count,
        // the root directory's empty path, its inode and its entry count.
        let tag = 8 + 4 + 1 + root.bytes.count + 1 + 1 + 8 + 1
        XCTAssertEqual(bytes[tag], 0)
        bytes[tag] = 7
        bytes.removeLast(4)
        let checksum = CRC32C.checksum(bytes[...])
        withUnsafeBytes(of: checksum.littleEndian) { bytes.append(contentsOf: $0) }
        XCTAssertNoThrow(try StateFileFormat.check(bytes, expectingRoot: root))
        XCTAssertThrowsError(try StateFileFormat.decodeChecked(bytes)) { error in
            guard case .malformed(let what) = error as? StateFileFormat.Problem else {
                return XCTFail("not malformed: \(error)")
            }
            XCTAssertTrue(what.contains("unknown kind 7"), what)
        }
        XCTAssertThrowsError(try decoded(bytes))
    }
}
