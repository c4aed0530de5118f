import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// What a fanotify mark asks for.
final class FanotifyTranslationTests: XCTestCase {
    func testTheMarkAsksForOpensAndClosesOnlyForAWatcherThatDoes() {
        XCTAssertEqual(
            FanotifyTranslation.markMask(selecting: EventMask.directoryWatch), FanotifyTranslation.baseMask)
        XCTAssertNotEqual(FanotifyTranslation.markMask(selecting: EventMask.open) & UInt64(EventMask.open), 0)
    }
}
