import XCTest

@testable import DirectoryWatcher

/// Turning a merged fanotify mask into inotify events, in the order they are reported.
final class FanotifyTranslationTests: XCTestCase {
    func testOneEventPerBitCreationFirstRemovalLast() {
        let mask = UInt64(InotifyMask.delete | InotifyMask.modify | InotifyMask.create | InotifyMask.closeWrite)
        XCTAssertEqual(
            FanotifyTranslation.entryEvents(mask) { false },
            [InotifyMask.create, InotifyMask.modify, InotifyMask.closeWrite, InotifyMask.delete])
    }

    func testACreationAndRemovalOfAnEntryThatExistsIsAReplace() {
        let mask = UInt64(InotifyMask.delete | InotifyMask.create) | FanotifyMask.onDirectory
        let directory = InotifyMask.isDirectory
        XCTAssertEqual(
            FanotifyTranslation.entryEvents(mask) { true },
            [InotifyMask.delete | directory, InotifyMask.create | directory])
    }

    func testExistenceIsAskedOnlyWhenTheOrderIsInDoubt() {
        var asked = 0
        _ = FanotifyTranslation.entryEvents(UInt64(InotifyMask.create | InotifyMask.modify)) {
            asked += 1
            return true
        }
        XCTAssertEqual(asked, 0)
    }

    func testADirectorysOwnEventsEndWithItsRemovalOverItsMove() {
        let mask = UInt64(InotifyMask.moveSelf | InotifyMask.deleteSelf | InotifyMask.attributes)
        let directory = InotifyMask.isDirectory
        XCTAssertEqual(
            FanotifyTranslation.directoryEvents(mask),
            [InotifyMask.attributes | directory, InotifyMask.deleteSelf | directory])
        XCTAssertEqual(
            FanotifyTranslation.directoryEvents(UInt64(InotifyMask.moveSelf)), [InotifyMask.moveSelf | directory])
    }

    func testTheMarkAsksForOpensAndClosesOnlyForAWatcherThatDoes() {
        XCTAssertEqual(
            FanotifyTranslation.markMask(selecting: InotifyMask.directoryWatch), FanotifyTranslation.baseMask)
        XCTAssertNotEqual(FanotifyTranslation.markMask(selecting: InotifyMask.open) & UInt64(InotifyMask.open), 0)
    }
}
