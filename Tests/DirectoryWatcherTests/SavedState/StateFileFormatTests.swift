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
}
