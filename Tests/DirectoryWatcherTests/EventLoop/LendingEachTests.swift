import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// `Array.lendEach`, which moves each element out of the array and back around the call (how
/// the loop lends fanotify's records to the router).
final class LendingEachTests: XCTestCase {
    /// Counts its instances alive, so that a lost or doubled element shows.
    private final class Tracked {
        nonisolated(unsafe) static var alive = 0
        let value: Int
        init(_ value: Int) {
            self.value = value
            Tracked.alive += 1
        }
        deinit { Tracked.alive -= 1 }
    }

    private struct Record {
        var object: Tracked
        var bytes: [UInt8]
        var number: Int
    }

    func testEachElementIsLentInOrderAndTheArrayIsAsBefore() {
        Tracked.alive = 0
        do {
            var records = (0..<5).map { Record(object: Tracked($0), bytes: [UInt8($0), 9], number: $0 * 10) }
            var seen: [Int] = []
            records.lendEach { record in
                XCTAssertEqual(record.object.value * 10, record.number)
                XCTAssertEqual(record.bytes, [UInt8(record.object.value), 9])
                seen.append(record.object.value)
            }
            XCTAssertEqual(seen, [0, 1, 2, 3, 4])
            XCTAssertEqual(records.map(\.object.value), [0, 1, 2, 3, 4])
            XCTAssertEqual(records.map(\.number), [0, 10, 20, 30, 40])
            XCTAssertEqual(Tracked.alive, 5)
        }
        XCTAssertEqual(Tracked.alive, 0, "every element freed once, none lost")
    }

    func testAnArrayItSharesIsLeftAsItWas() {
        Tracked.alive = 0
        do {
            let original = [Record(object: Tracked(1), bytes: [1], number: 1)]
            var copy = original
            var count = 0
            copy.lendEach { _ in count += 1 }
            XCTAssertEqual(count, 1)
            XCTAssertEqual(original[0].object.value, 1)
            XCTAssertTrue(original[0].object === copy[0].object)
        }
        XCTAssertEqual(Tracked.alive, 0)
    }

    func testAnEmptyArrayLendsNothing() {
        var records: [Record] = []
        records.lendEach { _ in XCTFail("nothing to lend") }
        XCTAssertTrue(records.isEmpty)
    }
}
