import XCTest

@testable import DirectoryWatcher

/// The table by descriptor against a `Dictionary` doing the same: random adds, changes and
/// removals, most of them in a small range of keys so that runs form, wrap around the end of
/// the slots and are shifted back by removals.
final class ByDescriptorTests: XCTestCase {
    func testItHoldsWhatADictionaryHoldsThroughRandomChanges() {
        for seed in UInt64(1)...20 {
            var random = SplitMix64(seed: seed)
            var table = ByDescriptor<[Int]>()
            var model: [Int32: [Int]] = [:]
            let range: ClosedRange<Int32> = seed % 2 == 0 ? 1...40 : 1...5_000
            for step in 0..<4_000 {
                let wd = Int32.random(in: range, using: &random)
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<4:
                    table[wd] = [step]
                    model[wd] = [step]
                case 4..<6:
                    // Changed in place, as the watch table changes an entry.
                    table[wd]?.append(step)
                    model[wd]?.append(step)
                case 6..<9:
                    XCTAssertEqual(table.removeValue(forKey: wd), model.removeValue(forKey: wd))
                default:
                    table[wd] = nil
                    model[wd] = nil
                }
                XCTAssertEqual(table.count, model.count)
            }
            for wd in range { XCTAssertEqual(table[wd], model[wd], "seed \(seed), descriptor \(wd)") }
            XCTAssertEqual(Set(table.keys), Set(model.keys))
            XCTAssertEqual(table.keys.count, model.count, "each descriptor once")
        }
    }

    /// Emptied entry by entry, in another order than it was filled: every lookup on the way finds
    /// what is left, and the table ends empty.
    func testEmptiedInAnyOrderEveryRemainingEntryIsFound() {
        var table = ByDescriptor<Int32>()
        let count: Int32 = 10_000
        for wd in 1...count { table[wd] = wd * 2 }
        var order = Array(1...count)
        var random = SplitMix64(seed: 7)
        order.shuffle(using: &random)
        for (index, wd) in order.enumerated() {
            XCTAssertEqual(table.removeValue(forKey: wd), wd * 2)
            if index % 1_000 == 0 {
                XCTAssertTrue(order[(index + 1)...].allSatisfy { table[$0] == $0 * 2 }, "after \(index + 1) removals")
            }
        }
        XCTAssertTrue(table.isEmpty)
        XCTAssertNil(table[1])
    }

    /// The overflow event's -1 and any descriptor never added are not found.
    func testADescriptorNeverAddedIsNotFound() {
        var table = ByDescriptor<String>()
        XCTAssertNil(table[-1])
        XCTAssertNil(table.removeValue(forKey: 3))
        table[3] = "three"
        XCTAssertNil(table[-1])
        XCTAssertNil(table[Int32.min])
        XCTAssertEqual(table[3], "three")
        XCTAssertEqual(table.keys, [3])
    }
}
