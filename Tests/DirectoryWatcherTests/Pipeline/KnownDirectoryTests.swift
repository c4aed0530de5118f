import CDirectoryWatcherShims
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// What a kept directory knows, as events change it, and what a rescan then reports: files
/// followed by their inode where one is on record, by name where not.
final class KnownDirectoryTests: XCTestCase {
    private func time(_ seconds: Int64) -> Snapshot.Time { Snapshot.Time(seconds: seconds, nanoseconds: 0) }

    /// A regular file as `statx` gives it.
    private func file(inode: UInt64, born: Int64, modified: Int64? = nil, size: Int64 = 0) -> Snapshot.Entry {
        var status = cdw_entry_status()
        status.mode = 0o100644
        status.inode = inode
        status.size = size
        status.mask = 0x800  // STATX_BTIME
        status.born_seconds = born
        status.modified_seconds = modified ?? born
        status.changed_seconds = modified ?? born
        return Snapshot.Entry(status)
    }

    private func event(_ mask: UInt32, _ name: String) -> BackendEvent {
        BackendEvent(wd: 1, mask: mask, name: Array(name.utf8))
    }

    private func snapshot(_ entries: [String: Snapshot.Entry]) -> Snapshot {
        Snapshot(entries: Dictionary(uniqueKeysWithValues: entries.map { (Array($0.key.utf8), $0.value) }))
    }

    /// Learns what a listing of names gives, as the router does.
    private func learn(_ directory: KnownDirectory, _ listed: [(String, UInt64)], listedAfter start: Snapshot.Time) {
        do {
            try directory.learnInodes(listedAfter: start) { visit in
                for (name, inode) in listed { visit(Array(name.utf8)[...], inode) }
            }
        } catch {
            XCTFail("\(error)")
        }
    }

    private func summary(_ differences: [Snapshot.Difference]) -> [String] {
        differences.map { difference in
            let name = String(decoding: difference.name, as: UTF8.self)
            if let old = difference.oldName {
                return "\(difference.kind) \(String(decoding: old, as: UTF8.self)) -> \(name)"
            }
            return "\(difference.kind) \(name)"
        }
    }

    func testACreatedFileWhoseInodeWasLearntIsFollowedToItsNewName() {
        let directory = KnownDirectory(Snapshot())
        XCTAssertTrue(directory.apply(event(EventMask.create, "a"), at: time(100)))
        XCTAssertTrue(directory.lacksInodes, "an event created it: its inode is not on record")
        learn(directory, [("a", 42)], listedAfter: time(101))
        XCTAssertFalse(directory.lacksInodes)
        // Events lost: a was renamed to b, and written.
        let now = snapshot(["b": file(inode: 42, born: 100, modified: 200, size: 5)])
        XCTAssertEqual(summary(directory.differences(to: now)), ["renamed a -> b", "modified b"])
    }

    func testTheNamesLackingInodesAreTheCreatedOnesUpToALimit() {
        let directory = KnownDirectory(snapshot(["listed": file(inode: 7, born: 50)]))
        for name in ["a", "b", "c"] { _ = directory.apply(event(EventMask.create, name), at: time(100)) }
        XCTAssertEqual(
            directory.namesLackingInodes(atMost: 3).map { Set($0) },
            [Array("a".utf8), Array("b".utf8), Array("c".utf8)])
        XCTAssertNil(directory.namesLackingInodes(atMost: 2), "more than the limit")
        // Learnt: none lacks any more, unless born in the tick the reading began.
        learn(directory, [("a", 1), ("b", 2)], listedAfter: time(101))
        XCTAssertEqual(directory.namesLackingInodes(atMost: 3), [Array("c".utf8)], "c was not found")
        _ = directory.apply(event(EventMask.create, "d"), at: time(102))
        learn(directory, [("d", 4)], listedAfter: time(102))
        XCTAssertEqual(
            directory.namesLackingInodes(atMost: 3).map { Set($0) }, [Array("c".utf8), Array("d".utf8)],
            "d may have been born in the tick the reading began: read again")
    }

    func testWithoutItsInodeARenamedFileIsARemovalAndACreation() {
        let directory = KnownDirectory(Snapshot())
        _ = directory.apply(event(EventMask.create, "a"), at: time(100))
        let now = snapshot(["b": file(inode: 42, born: 100)])
        XCTAssertEqual(summary(directory.differences(to: now)), ["removed a", "created b"])
    }

    func testAFileBornAfterTheListingIsNotTakenForTheOneListed() {
        // The inode was freed and given to a new file after the names were listed.
        let directory = KnownDirectory(Snapshot())
        _ = directory.apply(event(EventMask.create, "a"), at: time(100))
        learn(directory, [("a", 42)], listedAfter: time(101))
        let now = snapshot(["b": file(inode: 42, born: 150)])
        XCTAssertEqual(summary(directory.differences(to: now)), ["removed a", "created b"])
    }

    func testAFileThatMayBeBornInTheListingsTickIsListedAgainBeforeItIsVouchedFor() {
        let directory = KnownDirectory(Snapshot())
        _ = directory.apply(event(EventMask.create, "a"), at: time(101))
        let listed: [(String, UInt64)] = [("a", 42)]
        learn(directory, listed, listedAfter: time(101))
        XCTAssertTrue(directory.lacksInodes, "its event was read in the tick the listing began in")
        let now = snapshot(["b": file(inode: 42, born: 100)])
        XCTAssertEqual(summary(directory.differences(to: now)), ["removed a", "created b"])
        XCTAssertEqual(
            summary(directory.differences(to: snapshot(["a": file(inode: 42, born: 100)]))), [],
            "until then it is followed by its name")
        learn(directory, listed, listedAfter: time(102))
        XCTAssertFalse(directory.lacksInodes)
        XCTAssertEqual(summary(directory.differences(to: now)), ["renamed a -> b"])
    }

    func testAListedFileKeepsItsInodeWhenWritten() {
        let directory = KnownDirectory(snapshot(["a": file(inode: 7, born: 10)]))
        XCTAssertTrue(directory.apply(event(EventMask.modify, "a"), at: time(100)))
        XCTAssertFalse(directory.lacksInodes, "its inode came with the listing")
        let now = snapshot(["b": file(inode: 7, born: 10, modified: 200, size: 9)])
        XCTAssertEqual(summary(directory.differences(to: now)), ["renamed a -> b", "modified b"])
    }

    func testAFileReplacedUnderItsNameIsRemovedAndCreated() {
        // a's inode is known; the name now holds another file (saved atomically, say).
        let directory = KnownDirectory(snapshot(["a": file(inode: 7, born: 10)]))
        _ = directory.apply(event(EventMask.modify, "a"), at: time(100))
        let now = snapshot(["a": file(inode: 8, born: 150)])
        XCTAssertEqual(summary(directory.differences(to: now)), ["removed a", "created a"])
    }

    func testARenameKeepsWhatIsKnownAndAMoveInLacksAnInode() {
        let directory = KnownDirectory(snapshot(["a": file(inode: 7, born: 10)]))
        directory.renamed(from: Array("a".utf8)[...], to: Array("b".utf8)[...], isDirectory: false, at: time(100))
        XCTAssertFalse(directory.lacksInodes)
        directory.putIn(Array("c".utf8)[...], nil, isDirectory: false, at: time(100))
        XCTAssertTrue(directory.lacksInodes)
        let now = snapshot(["d": file(inode: 7, born: 10), "c": file(inode: 9, born: 50)])
        XCTAssertEqual(summary(directory.differences(to: now)), ["renamed b -> d"])
    }

    /// A tree's listing vouches for the inodes it read, through the events that change the
    /// entries and the renames that carry them; an inode learnt after an event does not (it is
    /// whatever was at the name then, maybe an entry whose move there is still to be read).
    func testTheInodesOfATreesListingAreListedAndLearntOnesAreNot() {
        let directory = KnownDirectory(
            listing: [(Array("a".utf8), 7, false), (Array("d".utf8), 8, true)], listedAfter: time(10), at: time(11))
        XCTAssertEqual(directory.listedInode(Array("a".utf8)[...]), 7)
        _ = directory.apply(event(EventMask.attributes, "a"), at: time(12))
        directory.renamed(from: Array("d".utf8)[...], to: Array("e".utf8)[...], isDirectory: true, at: time(12))
        XCTAssertEqual(directory.listedInode(Array("a".utf8)[...]), 7)
        XCTAssertEqual(directory.listedInode(Array("e".utf8)[...]), 8)
        XCTAssertTrue(directory.apply(event(EventMask.create, "b"), at: time(12)))
        learn(directory, [("a", 7), ("b", 9), ("e", 8)], listedAfter: time(20))
        XCTAssertNil(directory.listedInode(Array("b".utf8)[...]))
        XCTAssertNil(directory.listedInode(Array("c".utf8)[...]))
    }

    func testTheKernelsCreationOfANameARescanReportedIsNotNews() {
        let directory = KnownDirectory(snapshot(["a": file(inode: 7, born: 10)]))
        XCTAssertFalse(directory.apply(event(EventMask.create, "a"), at: time(100)))
        XCTAssertFalse(directory.lacksInodes)
        XCTAssertFalse(directory.apply(event(EventMask.delete, "gone"), at: time(100)))
    }
}
