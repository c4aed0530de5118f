import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The `getdents64` parser on hand-built records.
final class DirectoryEntryParserTests: XCTestCase {
    /// One `linux_dirent64` record: inode, offset, length, type, name, NUL padding to 8 bytes.
    private func record(inode: UInt64, type: UInt8, name: [UInt8], paddedLength: Int? = nil) -> [UInt8] {
        let length = paddedLength ?? (DirectoryEntryParser.headerSize + name.count + 1 + 7) / 8 * 8
        var bytes: [UInt8] = []
        withUnsafeBytes(of: inode) { bytes += $0 }
        withUnsafeBytes(of: Int64(0)) { bytes += $0 }
        withUnsafeBytes(of: UInt16(length)) { bytes += $0 }
        bytes.append(type)
        bytes += name
        bytes += [UInt8](repeating: 0, count: length - DirectoryEntryParser.headerSize - name.count)
        return bytes
    }

    private func parse(_ bytes: [UInt8]) -> DirectoryEntryParser.Result {
        bytes.withUnsafeBytes { DirectoryEntryParser.parse($0) }
    }

    func testEntriesFollowOneAnotherAndDotsAreLeftOut() {
        let bytes =
            record(inode: 1, type: UInt8(DT_DIR), name: Array(".".utf8))
            + record(inode: 2, type: UInt8(DT_DIR), name: Array("..".utf8))
            + record(inode: 7, type: UInt8(DT_REG), name: Array("a".utf8))
            + record(inode: 8, type: UInt8(DT_DIR), name: Array("a-longer-name-than-the-header".utf8))
            + record(inode: 9, type: UInt8(DT_UNKNOWN), name: [0xFF, 0x0A, 0x2E])
        XCTAssertEqual(
            parse(bytes),
            .init(
                entries: [
                    .init(name: Array("a".utf8), inode: 7, type: UInt8(DT_REG)),
                    .init(name: Array("a-longer-name-than-the-header".utf8), inode: 8, type: UInt8(DT_DIR)),
                    .init(name: [0xFF, 0x0A, 0x2E], inode: 9, type: UInt8(DT_UNKNOWN)),
                ], malformedTrailingBytes: 0))
    }

    func testANameThatFillsItsRecordWithoutANulEndsWithTheRecord() {
        let name = Array("abcde".utf8)
        XCTAssertEqual(
            parse(record(inode: 3, type: UInt8(DT_REG), name: name, paddedLength: DirectoryEntryParser.headerSize + 5))
                .entries,
            [.init(name: name, inode: 3, type: UInt8(DT_REG))])
    }

    func testATruncatedOrImpossibleRecordIsNeverReadPast() {
        let whole = record(inode: 3, type: UInt8(DT_REG), name: Array("file".utf8))
        let truncated = whole + Array(whole.prefix(whole.count - 3))
        XCTAssertEqual(parse(truncated).entries.count, 1)
        XCTAssertEqual(parse(truncated).malformedTrailingBytes, whole.count - 3)
        // A record length shorter than the header would never advance: it ends the parse.
        var zeroLength = whole
        zeroLength[16] = 0
        zeroLength[17] = 0
        XCTAssertEqual(parse(zeroLength), .init(entries: [], malformedTrailingBytes: whole.count))
    }
}
