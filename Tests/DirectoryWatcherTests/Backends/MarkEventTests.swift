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
}
