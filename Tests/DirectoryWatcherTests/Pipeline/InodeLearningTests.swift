import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// When the router lists directories for the inodes of entries that events created, on a clock
/// the test turns by hand.
final class InodeLearningTests: XCTestCase {
    func testNothingLackingIsNeverDue() {
        var learning = InodeLearning()
        learning.eventRead(at: 5)
        XCTAssertNil(learning.deadline)
        learning.add(3)
        learning.remove(3)
        XCTAssertNil(learning.deadline, "a directory let go is not listed")
    }

    func testDueOnceIdleOrAtTheLatestUnderASteadyStream() {
        var learning = InodeLearning()
        learning.eventRead(at: 1_000)
        learning.add(3)
        XCTAssertEqual(learning.deadline, 1_000 + InodeLearning.idle)
        learning.add(4)
        learning.eventRead(at: 1_000 + InodeLearning.idle / 2)
        XCTAssertEqual(learning.deadline, 1_000 + InodeLearning.idle / 2 + InodeLearning.idle, "each event moves it")
        learning.eventRead(at: 1_000 + InodeLearning.latest)
        XCTAssertEqual(learning.deadline, 1_000 + InodeLearning.latest, "but never past the latest after the first")
        XCTAssertEqual(learning.due, [3, 4])
    }

    func testAListingIsFollowedByFiftyTimesWhatItTookAndAtLeastTheLeastSpacing() {
        var learning = InodeLearning()
        learning.add(3)
        let slow: UInt64 = 10_000_000
        learning.listed(stillDue: [3], took: slow, at: InodeLearning.idle)
        XCTAssertEqual(learning.due, [3], "born in the listing's tick: due again")
        XCTAssertEqual(learning.deadline, InodeLearning.idle + slow * 50)
        learning.listed(stillDue: [3], took: 1, at: InodeLearning.idle * 10)
        XCTAssertEqual(learning.deadline, InodeLearning.idle * 10 + InodeLearning.leastSpacing)
        learning.listed(stillDue: [], took: .max, at: InodeLearning.idle * 20)
        XCTAssertNil(learning.deadline, "all learnt: nothing due, and a listing's time never overflows")
    }

    func testAListingATestAskedForLeavesTheScheduleWhereItWas() {
        var learning = InodeLearning()
        learning.eventRead(at: 50)
        learning.add(3)
        learning.listed(stillDue: [3], took: 1, at: nil)
        XCTAssertEqual(learning.deadline, 50 + InodeLearning.idle, "spaced from the last scheduled listing, at 0")
    }
}
