import CDirectoryWatcherShims
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Snapshots read from real directories, and the differences between two of them.
final class SnapshotTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUp() {
        directory = TemporaryDirectory()
    }

    override func tearDown() {
        directory = nil
    }

    private func read(system: System = System()) throws -> Snapshot {
        try Snapshot.read(FileSystemPath(directory.path), system: system)
    }

    private func changes(_ old: Snapshot, _ new: Snapshot) -> [DirectoryChange] {
        Snapshot.changes(from: old, to: new, in: FileSystemPath(directory.path))
    }

    func testReadingListsEveryEntryWithItsKindAndStatus() throws {
        directory.touch("file")
        directory.write("file", "12345")
        directory.mkdir("dir")
        symlink("file", directory.url("link"))
        let odd: [UInt8] = [0x6F, 0xFF, 0x0A]
        let oddPath = FileSystemPath(directory.path).appending(bytes: odd)
        let fd = oddPath.withCString { open($0, O_CREAT | O_WRONLY, 0o600) }
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        let snapshot = try read()
        XCTAssertEqual(
            Set(snapshot.entries.keys), [Array("file".utf8), Array("dir".utf8), Array("link".utf8), odd])
        let file = try XCTUnwrap(snapshot.entries[Array("file".utf8)])
        XCTAssertEqual(file.kind, .file)
        XCTAssertEqual(file.size, 5)
        XCTAssertEqual(file.permissions, 0o644 & ~UInt32(umask(0o022)))
        XCTAssertEqual(snapshot.entries[Array("dir".utf8)]?.kind, .directory)
        XCTAssertEqual(snapshot.entries[Array("link".utf8)]?.kind, .symbolicLink, "links are not followed")
        XCTAssertEqual(snapshot.entries[odd]?.permissions, 0o600)
        var status = stat()
        XCTAssertEqual(lstat(directory.url("file"), &status), 0)
        XCTAssertEqual(file.inode, UInt64(status.st_ino))
        XCTAssertEqual(file.device, UInt64(status.st_dev))
    }

    func testManyEntriesTakeManyReads() throws {
        for index in 0..<3_000 { directory.touch("entry-with-a-long-name-\(index)") }
        XCTAssertEqual(try read().entries.count, 3_000)
    }

    /// A poll's fast path: the same listing is unchanged, across several reads of the
    /// directory; any change of an entry, or of the set of names, is not.
    func testUnchangedIsTrueOnlyForTheSameEntriesWithTheSameStatus() throws {
        for index in 0..<3_000 { directory.touch("entry-with-a-long-name-\(index)") }
        func unchanged(since old: Snapshot) throws -> Bool {
            try Snapshot.isUnchanged(FileSystemPath(directory.path), since: old, system: System())
        }
        var old = try read()
        XCTAssertTrue(try unchanged(since: old), "the same 3,000 entries")
        directory.write("entry-with-a-long-name-2999", "more")
        XCTAssertFalse(try unchanged(since: old), "one written")
        old = try read()
        directory.touch("new")
        XCTAssertFalse(try unchanged(since: old), "one more")
        old = try read()
        XCTAssertEqual(unlink(directory.url("new")), 0)
        XCTAssertFalse(try unchanged(since: old), "one fewer")
        old = try read()
        XCTAssertEqual(rename(directory.url("entry-with-a-long-name-7"), directory.url("renamed")), 0)
        XCTAssertFalse(try unchanged(since: old), "one renamed")
        old = try read()
        XCTAssertEqual(chmod(directory.url("renamed"), 0o600), 0)
        XCTAssertFalse(try unchanged(since: old), "one's mode changed")
        XCTAssertTrue(try unchanged(since: try read()))
        XCTAssertThrowsError(
            try Snapshot.isUnchanged(FileSystemPath(directory.url("missing")), since: old, system: System()))
    }

    func testAnEntryGoneBeforeItsStatusIsLeftOut() throws {
        directory.touch("stays")
        directory.touch("vanishes")
        let system = System(
            .live.failing(
                \.entryStatus, errno: ENOENT, times: 1,
                when: { _, name, _ in String(cString: name) == "vanishes" }))
        XCTAssertEqual(Set(try read(system: system).entries.keys), [Array("stays".utf8)])
    }

    func testAFailureNamesTheCall() {
        XCTAssertThrowsError(try Snapshot.read(FileSystemPath(directory.url("missing")), system: System())) { error in
            XCTAssertEqual(error as? SyscallError, SyscallError(function: "open", errno: ENOENT))
        }
        let failing = System(.live.failing(\.entryStatus, errno: EACCES))
        directory.touch("a")
        XCTAssertThrowsError(try read(system: failing)) { error in
            XCTAssertEqual(error as? SyscallError, SyscallError(function: "statx", errno: EACCES))
        }
    }

    /// The listing shared out among the cores gives what one thread's gives, in the same order:
    /// a directory shared out in many slices, with entries gone before their status (left out)
    /// and a status that cannot be read (the listing fails, naming the call).
    func testAListingOnEveryCoreIsTheListingOfOneThread() throws {
        let count = 600
        for index in 0..<count { directory.touch("entry-\(index)") }
        let path = FileSystemPath(directory.path)
        func visited(_ body: ((ArraySlice<UInt8>, EntryStatus) -> Void) throws(SyscallError) -> Void) rethrows
            -> [([UInt8], EntryStatus)]
        {
            var entries: [([UInt8], EntryStatus)] = []
            try body { name, status in entries.append((Array(name), status)) }
            return entries
        }
        let one = try visited { body throws(SyscallError) in try Snapshot.visitEntries(path, system: System(), body) }
        var expected: (names: Int, bytes: Int)?
        let every = try visited { body throws(SyscallError) in
            try Snapshot.visitEntriesOnEveryCore(
                path, system: System(), slice: 16, sharedFrom: 32, expecting: { expected = ($0, $1) }, body)
        }
        XCTAssertEqual(one.count, count)
        XCTAssertEqual(every.map(\.0), one.map(\.0), "the same names in the same order")
        XCTAssertEqual(every.map(\.1), one.map(\.1), "the same statuses")
        if cdw_usable_cores() > 1 {
            XCTAssertEqual(expected?.names, count)
            XCTAssertEqual(expected?.bytes, one.reduce(0) { $0 + $1.0.count })
        }

        let vanishing: Set<String> = ["entry-7", "entry-300", "entry-\(count - 1)"]
        let gone = System(
            .live.failing(
                \.entryStatus, errno: ENOENT, times: vanishing.count,
                when: { _, name, _ in vanishing.contains(String(cString: name)) }))
        let left = try visited { body throws(SyscallError) in
            try Snapshot.visitEntriesOnEveryCore(path, system: gone, slice: 16, sharedFrom: 32, body)
        }
        XCTAssertEqual(left.map(\.0), one.map(\.0).filter { !vanishing.contains(String(decoding: $0, as: UTF8.self)) })

        let failing = System(
            .live.failing(\.entryStatus, errno: EACCES, when: { _, name, _ in String(cString: name) == "entry-410" }))
        XCTAssertThrowsError(
            try visited { body throws(SyscallError) in
                try Snapshot.visitEntriesOnEveryCore(path, system: failing, slice: 16, sharedFrom: 32, body)
            }
        ) { error in
            XCTAssertEqual(error as? SyscallError, SyscallError(function: "statx", errno: EACCES))
        }
    }

    func testEachKindOfChange() throws {
        directory.touch("removed")
        directory.touch("renamed")
        directory.touch("written")
        directory.touch("chmodded")
        directory.mkdir("subdir")
        let before = try read()
        unlink(directory.url("removed"))
        rename(directory.url("renamed"), directory.url("renamed-to"))
        directory.write("written", "more")
        chmod(directory.url("chmodded"), 0o600)
        directory.touch("subdir/inside")  // the subdirectory's times move: not a change here
        directory.touch("created")
        XCTAssertEqual(
            changes(before, try read()),
            [
                DirectoryChange(.removed, directory.url("removed")),
                DirectoryChange(.renamed, directory.url("renamed-to"), from: directory.url("renamed")),
                DirectoryChange(.created, directory.url("created")),
                DirectoryChange(.attributesChanged, directory.url("chmodded")),
                DirectoryChange(.modified, directory.url("written")),
            ])
    }

    func testARenameOverAnotherFileReplacesIt() throws {
        directory.touch("a")
        directory.touch("b")
        let before = try read()
        rename(directory.url("a"), directory.url("b"))
        XCTAssertEqual(
            changes(before, try read()), [DirectoryChange(.renamed, directory.url("b"), from: directory.url("a"))])
    }

    func testAChainOfRenamesComesInAnOrderThatApplies() throws {
        directory.touch("a")
        directory.touch("b")
        let before = try read()
        rename(directory.url("b"), directory.url("c"))
        rename(directory.url("a"), directory.url("b"))
        XCTAssertEqual(
            changes(before, try read()),
            [
                DirectoryChange(.renamed, directory.url("c"), from: directory.url("b")),
                DirectoryChange(.renamed, directory.url("b"), from: directory.url("a")),
            ])
    }

    func testTwoNamesSwappedAreOneRenameAndAReplacement() throws {
        directory.touch("a")
        directory.touch("b")
        let before = try read()
        rename(directory.url("a"), directory.url("t"))
        rename(directory.url("b"), directory.url("a"))
        rename(directory.url("t"), directory.url("b"))
        XCTAssertEqual(
            changes(before, try read()),
            [
                DirectoryChange(.removed, directory.url("b")),
                DirectoryChange(.renamed, directory.url("b"), from: directory.url("a")),
                DirectoryChange(.created, directory.url("a")),
            ])
    }

    func testAFileReplacedByANewOneIsRemovedAndCreatedEvenWhenTheInodeIsReused() throws {
        directory.touch("f")
        let before = try read()
        unlink(directory.url("f"))
        directory.touch("g")
        directory.touch("f")
        let after = try read()
        XCTAssertEqual(
            changes(before, after),
            [
                DirectoryChange(.removed, directory.url("f")),
                DirectoryChange(.created, directory.url("f")),
                DirectoryChange(.created, directory.url("g")),
            ])
    }

    func testAnotherHardLinkIsACreation() throws {
        directory.touch("a")
        let before = try read()
        link(directory.url("a"), directory.url("b"))
        XCTAssertEqual(
            changes(before, try read()),
            [
                DirectoryChange(.created, directory.url("b")),
                // The link count is an attribute of the file both names share.
                DirectoryChange(.attributesChanged, directory.url("a")),
            ])
    }

    func testNoChangeNoDifference() throws {
        directory.touch("a")
        directory.mkdir("d")
        XCTAssertEqual(changes(try read(), try read()), [])
    }
}

/// A small seeded generator, so a failing sequence can be run again from its seed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
