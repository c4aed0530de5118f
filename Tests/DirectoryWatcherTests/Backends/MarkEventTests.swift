import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// A mark backend's record, whose mask the kernel may have merged, as backend events, in the
/// order they are reported.
final class MarkEventTests: XCTestCase {
    private func entryEvents(_ mask: UInt64, exists: () -> Bool) -> [UInt32] {
        var events: [UInt32] = []
        MarkEvent.forEachEntryEvent(mask, exists: exists) { events.append($0) }
        return events
    }

    func testOneEventPerBitCreationFirstRemovalLast() {
        let mask = UInt64(EventMask.delete | EventMask.modify | EventMask.create | EventMask.closeWrite)
        XCTAssertEqual(
            entryEvents(mask) { false },
            [EventMask.create, EventMask.modify, EventMask.closeWrite, EventMask.delete])
    }

    func testACreationAndRemovalOfAnEntryThatExistsIsAReplace() {
        let mask = UInt64(EventMask.delete | EventMask.create) | MarkBits.onDirectory
        let directory = EventMask.isDirectory
        XCTAssertEqual(
            entryEvents(mask) { true },
            [EventMask.delete | directory, EventMask.create | directory])
    }

    func testExistenceIsAskedOnlyWhenTheOrderIsInDoubt() {
        var asked = 0
        _ = entryEvents(UInt64(EventMask.create | EventMask.modify)) {
            asked += 1
            return true
        }
        XCTAssertEqual(asked, 0)
    }

    func testADirectorysOwnEventsEndWithItsRemovalOverItsMove() {
        let mask = UInt64(EventMask.moveSelf | EventMask.deleteSelf | EventMask.attributes)
        let directory = EventMask.isDirectory
        XCTAssertEqual(
            MarkEvent.directoryEvents(mask),
            [EventMask.attributes | directory, EventMask.deleteSelf | directory])
        XCTAssertEqual(
            MarkEvent.directoryEvents(UInt64(EventMask.moveSelf)), [EventMask.moveSelf | directory])
    }

    /// A record keeps its handles as bytes beside its names, read where they are: each reads
    /// back as it was given, and is told from another by its id, type, length or bytes.
    func testHandlesReadBackFromTheRecordsBytes() {
        func handle(_ bytes: [UInt8], type: Int32 = 1, id: UInt8 = 1) -> KernelHandle {
            KernelHandle(fileSystemID: [UInt8](repeating: id, count: 8), type: type, bytes: bytes)
        }
        let old = handle([1, 2, 3, 4, 5, 6, 7, 8])
        let new = handle([9])
        let object = handle([], type: -2)
        let event = MarkEvent(
            mask: MarkBits.rename, directory: old, name: Array("a".utf8), newDirectory: new,
            newName: Array("bc".utf8), object: object)
        XCTAssertEqual(event.directory, old)
        XCTAssertEqual(event.newDirectory, new)
        XCTAssertEqual(event.object, object)
        XCTAssertEqual(event.name, Array("a".utf8))
        XCTAssertEqual(event.newName, Array("bc".utf8))
        XCTAssertTrue(event.names(old))
        XCTAssertTrue(event.names(new, renamed: true))
        XCTAssertFalse(event.names(new))
        XCTAssertFalse(event.names(old, renamed: true))
        XCTAssertFalse(event.names(handle([1, 2, 3, 4, 5, 6, 7, 9])), "other bytes")
        XCTAssertFalse(event.names(handle([1, 2, 3, 4, 5, 6, 7, 8], type: 2)), "another type")
        XCTAssertFalse(event.names(handle([1, 2, 3, 4, 5, 6, 7, 8], id: 2)), "another file system")
        XCTAssertFalse(event.names(handle([1, 2, 3, 4, 5, 6, 7])), "shorter")
        XCTAssertFalse(event.names(handle([1, 2, 3, 4, 5, 6, 7, 8, 0])), "longer")

        let none = MarkEvent(mask: UInt64(EventMask.create), name: Array("f".utf8))
        XCTAssertNil(none.directory)
        XCTAssertNil(none.newDirectory)
        XCTAssertNil(none.object)
        XCTAssertFalse(none.names(old))
        XCTAssertFalse(none.names(old, renamed: true))
        XCTAssertEqual(MarkEvent(mask: MarkBits.queueOverflow).directory, nil)
    }
}
