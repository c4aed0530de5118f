import XCTest

@testable import DirectoryWatcher

/// Turning a merged fanotify mask into inotify events, in the order they are reported.
final class FanotifyTranslationTests: XCTestCase {
    func testOneEventPerBitCreationFirstRemovalLast() {
        let mask = UInt64(EventMask.delete | EventMask.modify | EventMask.create | EventMask.closeWrite)
        XCTAssertEqual(
            FanotifyTranslation.entryEvents(mask) { false },
            [EventMask.create, EventMask.modify, EventMask.closeWrite, EventMask.delete])
    }

    func testACreationAndRemovalOfAnEntryThatExistsIsAReplace() {
        let mask = UInt64(EventMask.delete | EventMask.create) | MarkBits.onDirectory
        let directory = EventMask.isDirectory
        XCTAssertEqual(
            FanotifyTranslation.entryEvents(mask) { true },
            [EventMask.delete | directory, EventMask.create | directory])
    }

    func testExistenceIsAskedOnlyWhenTheOrderIsInDoubt() {
        var asked = 0
        _ = FanotifyTranslation.entryEvents(UInt64(EventMask.create | EventMask.modify)) {
            asked += 1
            return true
        }
        XCTAssertEqual(asked, 0)
    }

    func testADirectorysOwnEventsEndWithItsRemovalOverItsMove() {
        let mask = UInt64(EventMask.moveSelf | EventMask.deleteSelf | EventMask.attributes)
        let directory = EventMask.isDirectory
        XCTAssertEqual(
            FanotifyTranslation.directoryEvents(mask),
            [EventMask.attributes | directory, EventMask.deleteSelf | directory])
        XCTAssertEqual(
            FanotifyTranslation.directoryEvents(UInt64(EventMask.moveSelf)), [EventMask.moveSelf | directory])
    }

    func testTheMarkAsksForOpensAndClosesOnlyForAWatcherThatDoes() {
        XCTAssertEqual(
            FanotifyTranslation.markMask(selecting: EventMask.directoryWatch), FanotifyTranslation.baseMask)
        XCTAssertNotEqual(FanotifyTranslation.markMask(selecting: EventMask.open) & UInt64(EventMask.open), 0)
    }
}
