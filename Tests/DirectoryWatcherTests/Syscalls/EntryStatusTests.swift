import CDirectoryWatcherShims
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// A status is kept for every entry of every kept directory, so it is stored packed
/// (``EntryStatus``): what it gives back must be what `statx` said, field by field, and the size
/// it was packed for must hold, or a kept directory costs more than the benchmark says.
final class EntryStatusTests: XCTestCase {
    private func status(
        mode: UInt32 = 0o100644, modified: (Int64, UInt32) = (0, 0), changed: (Int64, UInt32) = (0, 0),
        born: (Int64, UInt32)? = nil
    ) -> EntryStatus {
        var raw = cdw_entry_status()
        raw.mode = mode
        raw.uid = 501
        raw.gid = 20
        raw.device = 0x0803
        raw.inode = 1 << 40
        raw.size = 1 << 33
        (raw.modified_seconds, raw.modified_nanoseconds) = modified
        (raw.changed_seconds, raw.changed_nanoseconds) = changed
        if let born {
            raw.mask = 0x800  // STATX_BTIME
            (raw.born_seconds, raw.born_nanoseconds) = born
        }
        return EntryStatus(raw)
    }

    func testWhatStatxSaidIsWhatTheStatusGives() {
        let entry = status(
            mode: 0o104755, modified: (1_764_000_000, 999_999_999), changed: (1_764_000_001, 5),
            born: (1_700_000_000, 123_456_789))
        XCTAssertEqual(entry.mode, 0o104755)
        XCTAssertEqual(entry.kind, .file)
        XCTAssertEqual(entry.permissions, 0o4755)
        XCTAssertEqual(entry.owner, 501)
        XCTAssertEqual(entry.group, 20)
        XCTAssertEqual(entry.device, 0x0803)
        XCTAssertEqual(entry.inode, 1 << 40)
        XCTAssertEqual(entry.size, 1 << 33)
        XCTAssertEqual(entry.modified, .init(seconds: 1_764_000_000, nanoseconds: 999_999_999))
        XCTAssertEqual(entry.changed, .init(seconds: 1_764_000_001, nanoseconds: 5))
        XCTAssertEqual(entry.born, .init(seconds: 1_700_000_000, nanoseconds: 123_456_789))
        XCTAssertNil(status().born, "no birth time where statx gave none")
        XCTAssertEqual(status(born: (0, 0)).born, .init(seconds: 0, nanoseconds: 0), "1970 is a birth time")
    }

    /// A modification time may be set to anything (`touch -d`), and comes back whole; the change
    /// and birth times are the kernel's clock, kept as nanoseconds from 1678 to 2262.
    func testTimesBeforeNineteenSeventyAndFarAheadComeBack() {
        let old = status(modified: (-1, 1), changed: (-1, 999_999_999), born: (-86_400, 0))
        XCTAssertEqual(old.modified, .init(seconds: -1, nanoseconds: 1))
        XCTAssertEqual(old.changed, .init(seconds: -1, nanoseconds: 999_999_999))
        XCTAssertEqual(old.born, .init(seconds: -86_400, nanoseconds: 0))
        let far = status(modified: (Int64.max, 999_999_999))
        XCTAssertEqual(far.modified, .init(seconds: Int64.max, nanoseconds: 999_999_999))
        XCTAssertEqual(
            status(changed: (300_000_000_000, 0)), status(changed: (300_000_000_001, 0)), "beyond 2262: clamped alike")
        XCTAssertNotNil(status(born: (Int64.min, 0)).born, "clamped, still a birth time")
    }

    func testStatusesDifferInEachField() {
        let base = status(modified: (10, 1), changed: (10, 2), born: (9, 3))
        XCTAssertEqual(base, status(modified: (10, 1), changed: (10, 2), born: (9, 3)))
        XCTAssertNotEqual(base, status(modified: (10, 2), changed: (10, 2), born: (9, 3)))
        XCTAssertNotEqual(base, status(modified: (10, 1), changed: (10, 3), born: (9, 3)))
        XCTAssertNotEqual(base, status(modified: (10, 1), changed: (10, 2), born: (9, 4)))
        XCTAssertNotEqual(base, status(modified: (10, 1), changed: (10, 2)))
        XCTAssertNotEqual(base, status(mode: 0o100600, modified: (10, 1), changed: (10, 2), born: (9, 3)))
        var moved = base
        moved.born = nil
        XCTAssertNil(moved.born)
        moved.born = .init(seconds: 9, nanoseconds: 3)
        XCTAssertEqual(moved, base)
    }

    /// 58 bytes (the plain layout took 88), so that a kept entry's record, the status with its
    /// tag, the name's length and its place, is 64.
    func testAKeptEntryIsSixtyFourBytes() {
        XCTAssertLessThanOrEqual(MemoryLayout<EntryStatus>.size, 58)
        XCTAssertLessThanOrEqual(MemoryLayout<KnownDirectory.Known>.size, 59)
        XCTAssertLessThanOrEqual(NameTable<KnownDirectory.Known>.recordStride, 64)
    }

    /// The kernel's device numbers fit the 32 bits kept (a 12-bit major, a 20-bit minor, as
    /// `makedev` combines them); a number beyond them is folded, and still tells two apart.
    func testDeviceNumbersTheKernelGivesComeBackWhole() {
        var entry = status()
        for (major, minor) in [(0, 0), (8, 3), (259, 1 << 19), (4095, (1 << 20) - 1), (0, 4097)] {
            // glibc's makedev.
            let (major, minor) = (UInt64(major), UInt64(minor))
            let device = (major & 0xFFF) << 8 | (major & ~0xFFF) << 32 | minor & 0xFF | (minor & ~0xFF) << 12
            entry.device = device
            XCTAssertEqual(entry.device, device, "major \(major), minor \(minor)")
        }
        entry.device = 1 << 40 | 5
        XCTAssertEqual(entry.device, UInt64(UInt32(1 << 8 | 5)), "folded")
        var other = entry
        other.device = 1 << 40 | 6
        XCTAssertNotEqual(entry, other)
    }
}
