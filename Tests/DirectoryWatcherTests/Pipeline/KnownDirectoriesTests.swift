import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The router's kept directories by descriptor: empty ones share an object until one is asked
/// for to be changed, and a change to one never shows in another.
final class KnownDirectoriesTests: XCTestCase {
    private let now = Snapshot.Time(seconds: 100, nanoseconds: 0)

    private func created(_ name: String) -> BackendEvent {
        BackendEvent(wd: 1, mask: EventMask.create, name: Array(name.utf8))
    }

    private func names(_ entries: NameTable<KnownDirectory.Known>?) -> Set<String> {
        var names: Set<String> = []
        entries?.forEach { name, _ in names.insert(String(decoding: name, as: UTF8.self)) }
        return names
    }

    func testEmptyDirectoriesShareAnObjectUntilOneIsAskedForAndThenHaveTheirOwn() throws {
        var known = KnownDirectories()
        known[1] = KnownDirectory(entries: NameTable())
        known[2] = KnownDirectory(entries: NameTable())
        XCTAssertTrue(known.isShared(1))
        XCTAssertTrue(known.isShared(2))
        // Reading makes no object.
        XCTAssertTrue(known.contains(1))
        XCTAssertEqual(names(known.entries(1)), [])
        XCTAssertTrue(known.isShared(1))

        let own = try XCTUnwrap(known[1])
        XCTAssertFalse(known.isShared(1))
        XCTAssertTrue(known.isShared(2), "the other keeps sharing")
        XCTAssertTrue(known[1] === own, "asked again: the same object")
        XCTAssertTrue(own.apply(created("f"), at: now))
        XCTAssertEqual(names(known.entries(1)), ["f"])
        XCTAssertEqual(names(known.entries(2)), [], "a change to one never shows in another")
        XCTAssertTrue(known.isShared(2))
        XCTAssertEqual(names(known[2]?.entries), [])
        XCTAssertFalse(known.isShared(2))
        XCTAssertEqual(known.count, 2)
        XCTAssertEqual(Set(known.descriptors), [1, 2])
        XCTAssertFalse(known.contains(3))
        XCTAssertNil(known[3])
    }

    func testAnEmptyDirectoryKeepsWhetherItSuppressesRepeats() throws {
        var known = KnownDirectories()
        let reporting = KnownDirectory(entries: NameTable())
        reporting.suppressesRepeats = false
        known[1] = reporting
        known[2] = KnownDirectory(entries: NameTable())
        XCTAssertTrue(known.isShared(1))
        XCTAssertFalse(try XCTUnwrap(known[1]).suppressesRepeats)
        XCTAssertTrue(try XCTUnwrap(known[2]).suppressesRepeats)
        // A repeat (the removal of a name not known) is news to the one that reports repeats.
        let removal = BackendEvent(wd: 1, mask: EventMask.delete, name: Array("gone".utf8))
        XCTAssertFalse(try XCTUnwrap(known[1]).apply(removal, at: now))
        XCTAssertFalse(try XCTUnwrap(known[1]).suppressesRepeats)
    }

    func testADirectoryWithEntriesOrSomethingPendingIsKeptAsItIs() throws {
        var known = KnownDirectories()
        let full = KnownDirectory(entries: NameTable())
        XCTAssertTrue(full.apply(created("f"), at: now))
        known[1] = full
        XCTAssertFalse(known.isShared(1))
        XCTAssertTrue(known[1] === full)

        // Emptied, but with its inodes still to learn: not pristine.
        let pending = KnownDirectory(entries: NameTable())
        pending.putIn(Array("m".utf8)[...], nil, isDirectory: false, at: now)
        _ = pending.takeOut(Array("m".utf8)[...])
        XCTAssertTrue(pending.lacksInodes)
        known[2] = pending
        XCTAssertFalse(known.isShared(2))
        XCTAssertTrue(known[2] === pending)

        known[1] = nil
        XCTAssertFalse(known.contains(1))
    }

    func testADirectoryARescanFindsEmptySharesAgain() throws {
        var known = KnownDirectories()
        known[1] = KnownDirectory(entries: NameTable())
        let own = try XCTUnwrap(known[1])
        XCTAssertTrue(own.apply(created("f"), at: now))
        own.reset(to: Snapshot())
        // Only the object the table holds is shared again.
        known.share(1, ifStill: KnownDirectory(entries: NameTable()))
        XCTAssertFalse(known.isShared(1))
        known.share(1, ifStill: own)
        XCTAssertTrue(known.isShared(1))
        // Not while it has entries.
        let other = try XCTUnwrap(known[1])
        XCTAssertTrue(other.apply(created("g"), at: now))
        known.share(1, ifStill: other)
        XCTAssertFalse(known.isShared(1))
        XCTAssertEqual(names(known.entries(1)), ["g"])
    }
}
