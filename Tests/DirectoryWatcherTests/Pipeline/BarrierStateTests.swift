import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

final class BarrierStateTests: XCTestCase {
    func testOneWriteInFlightAtATime() {
        var state = BarrierState<Int>()
        XCTAssertTrue(state.request(1), "the first request writes")
        XCTAssertFalse(state.request(2), "the second waits for the first write's event")
        XCTAssertFalse(state.request(3))
        let (satisfied, again) = state.reached()
        XCTAssertEqual(satisfied, [1])
        XCTAssertTrue(again, "the waiting requests need a write of their own")
        XCTAssertEqual(state.reached().satisfied, [2, 3])
        XCTAssertEqual(state.reached().satisfied, [], "a late event satisfies nothing")
    }

    func testOverflowCompletesInFlightAndIgnoresStaleEvents() {
        var state = BarrierState<Int>()
        XCTAssertTrue(state.request(1))
        XCTAssertEqual(state.overflowed(), [1])
        XCTAssertFalse(state.request(2), "no write while stale events may still arrive")
        XCTAssertEqual(state.reached().satisfied, [], "an event of the write before the overflow is stale")
        XCTAssertTrue(state.drained(), "once drained, the waiting request gets its write")
        XCTAssertEqual(state.reached().satisfied, [2])
    }

    func testTakeAllEmptiesEverything() {
        var state = BarrierState<Int>()
        _ = state.request(1)
        _ = state.request(2)
        XCTAssertEqual(state.takeAll(), [1, 2])
        XCTAssertEqual(state.reached().satisfied, [])
    }
}
