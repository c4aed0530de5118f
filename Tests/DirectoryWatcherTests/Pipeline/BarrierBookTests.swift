import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The router's one book of barriers: what each request waits for, and that each comes back once,
/// in the order it was asked for.
final class BarrierBookTests: XCTestCase {
    private final class Watcher {}
    private let a = Watcher()
    private let b = Watcher()

    func testEachWaitGivesBackItsOwnRequestsInOrderAndOnlyOnce() {
        var book = BarrierBook<Int>()
        let (a, b) = (ObjectIdentifier(self.a), ObjectIdentifier(self.b))
        book.wait(1, for: .catchUp(a))
        book.wait(2, for: .settling(a))
        book.wait(3, for: .catchUp(b))
        book.wait(4, for: .catchUp(a))
        book.wait(5, for: .resume(b))
        book.wait(6, for: .rescan)
        XCTAssertEqual(book.take(.catchUp(a)), [1, 4])
        XCTAssertEqual(book.take(.catchUp(a)), [], "taken once")
        XCTAssertEqual(book.take(.resume(a)), [], "a's resume was never waited for")
        XCTAssertEqual(book.take(.rescan), [6])
        XCTAssertEqual(book.take(allOf: b), [3, 5], "a watcher gone takes all its waits, in order")
        XCTAssertFalse(book.isEmpty)
        XCTAssertEqual(book.take(.settling(a)), [2])
        XCTAssertTrue(book.isEmpty)
    }

    func testAnOverflowMovesTheWriteInFlightBehindTheRescan() {
        var book = BarrierBook<Int>()
        XCTAssertTrue(book.request(1), "the first request writes")
        XCTAssertFalse(book.request(2), "one write in flight")
        book.overflowed()
        XCTAssertEqual(book.reached().satisfied, [], "the write's event, if it comes, is stale")
        XCTAssertEqual(book.take(.rescan), [1], "in flight at the overflow: completes after the rescan")
        XCTAssertTrue(book.drained(), "drained: the request that waited gets its own write")
        XCTAssertEqual(book.reached().satisfied, [2])
    }

    func testARequestMovedFromACatchUpToTheRescanCompletesWithIt() {
        var book = BarrierBook<Int>()
        let a = ObjectIdentifier(self.a)
        book.wait(1, for: .rescan)
        book.wait(2, for: .catchUp(a))
        for request in book.take(.catchUp(a)) { book.wait(request, for: .rescan) }
        XCTAssertEqual(book.take(.rescan), [1, 2])
        XCTAssertTrue(book.isEmpty)
    }

    func testShutdownTakesEverythingOnce() {
        var book = BarrierBook<Int>()
        let a = ObjectIdentifier(self.a)
        _ = book.request(1)
        _ = book.request(2)
        book.wait(3, for: .resume(a))
        book.wait(4, for: .rescan)
        XCTAssertEqual(book.takeAll(), [1, 2, 3, 4], "the barrier file's first")
        XCTAssertEqual(book.takeAll(), [])
        XCTAssertEqual(book.reached().satisfied, [], "a late event satisfies nothing")
    }
}
