import Dispatch
import Synchronization
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The shared walk of a tree's large level: its unsafe buffers of results and flags, read in order
/// by the loop's thread while helpers fill them (also run under both sanitizers by `.ci/run`).
final class LevelWalkTests: XCTestCase {
    /// A result that counts how many of its kind are alive, so that a leak or a double release shows.
    private final class Counted: @unchecked Sendable {
        static let alive = Atomic<Int>(0)
        let value: Int
        init(_ value: Int) {
            self.value = value
            Self.alive.wrappingAdd(1, ordering: .relaxed)
        }
        deinit { Self.alive.wrappingSubtract(1, ordering: .relaxed) }
    }

    func testEveryStepIsWalkedOnceAndItsResultReadInOrderWhileHelpersWalk() {
        let walked = LockedValue([Int](repeating: 0, count: 2_000))
        let before = Counted.alive.load(ordering: .relaxed)
        do {
            let work = LevelWalk(Array(0..<2_000)) { step -> Counted in
                walked.update { $0[step] += 1 }
                return Counted(step * 3)
            }
            let helpers = DispatchGroup()
            for _ in 0..<3 { DispatchQueue.global().async(group: helpers) { work.walkAll() } }
            for index in 0..<2_000 { XCTAssertEqual(work.result(index).value, index * 3) }
            helpers.wait()
        }
        XCTAssertEqual(walked.get(), Array(repeating: 1, count: 2_000))
        XCTAssertEqual(Counted.alive.load(ordering: .relaxed), before, "every result released once")
    }

    func testTheCallerAloneWalksEverythingItReads() {
        let work = LevelWalk(["a", "b", "c"]) { $0.uppercased() }
        XCTAssertEqual([2, 0, 1].map { work.result($0) }, ["C", "A", "B"], "in any order, with no helper")
    }

    func testResultsNeverReadAreReleasedWithTheWalk() {
        let before = Counted.alive.load(ordering: .relaxed)
        do {
            let work = LevelWalk(Array(0..<100)) { Counted($0) }
            work.walkAll()
            XCTAssertEqual(work.result(7).value, 7)
            XCTAssertEqual(Counted.alive.load(ordering: .relaxed), before + 99, "read: no longer held")
        }
        XCTAssertEqual(Counted.alive.load(ordering: .relaxed), before)
        _ = LevelWalk([Int]()) { $0 }  // an empty level allocates and frees nothing to speak of
    }
}
