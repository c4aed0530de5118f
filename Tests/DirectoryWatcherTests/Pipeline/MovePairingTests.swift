import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Move pairing on a clock driven by hand: no sleeps, every deadline exact.
final class MovePairingTests: XCTestCase {
    private let window: UInt64 = 1_000
    private func from(_ cookie: UInt32, _ name: String, wd: Int32 = 1) -> BackendEvent {
        BackendEvent(wd: wd, mask: EventMask.movedFrom, cookie: cookie, name: Array(name.utf8))
    }
    private func to(_ cookie: UInt32, _ name: String, wd: Int32 = 1) -> BackendEvent {
        BackendEvent(wd: wd, mask: EventMask.movedTo, cookie: cookie, name: Array(name.utf8))
    }
    private func create(_ name: String) -> BackendEvent {
        BackendEvent(wd: 1, mask: EventMask.create, name: Array(name.utf8))
    }

    func testPlainEventsPassStraightThrough() {
        var pairing = MovePairing(window: window)
        var out: [MovePairing.Item] = []
        pairing.push(create("a"), now: 0) { out.append($0) }
        XCTAssertEqual(out, [.event(create("a"))])
        XCTAssertNil(pairing.deadline)
        XCTAssertTrue(pairing.isEmpty)
    }

    func testFromThenToBecomeOneMove() {
        var pairing = MovePairing(window: window)
        var out: [MovePairing.Item] = []
        pairing.push(from(5, "old"), now: 0) { out.append($0) }
        XCTAssertEqual(out, [])
        XCTAssertEqual(pairing.deadline, window)
        pairing.push(to(5, "new", wd: 2), now: 10) { out.append($0) }
        XCTAssertEqual(out, [.move(from: from(5, "old"), to: to(5, "new", wd: 2))])
        XCTAssertTrue(pairing.isEmpty)
    }

    func testEventsBehindAWaitingFromKeepTheirOrder() {
        var pairing = MovePairing(window: window)
        var out: [MovePairing.Item] = []
        pairing.push(create("first"), now: 0) { out.append($0) }
        pairing.push(from(5, "old"), now: 0) { out.append($0) }
        pairing.push(create("between"), now: 1) { out.append($0) }
        XCTAssertEqual(out, [.event(create("first"))])
        pairing.push(to(5, "new"), now: 2) { out.append($0) }
        XCTAssertEqual(
            out, [.event(create("first")), .move(from: from(5, "old"), to: to(5, "new")), .event(create("between"))])
    }

    func testUnpairedFromIsReleasedAtItsDeadlineAndNotBefore() {
        var pairing = MovePairing(window: window)
        var out: [MovePairing.Item] = []
        pairing.push(from(5, "gone"), now: 100) { out.append($0) }
        pairing.push(create("after"), now: 150) { out.append($0) }
        pairing.expire(now: 100 + window - 1) { out.append($0) }
        XCTAssertEqual(out, [])
        pairing.expire(now: 100 + window) { out.append($0) }
        XCTAssertEqual(out, [.event(from(5, "gone")), .event(create("after"))])
        XCTAssertNil(pairing.deadline)
    }

    /// The router gives up on a departure it knows will get no partner (an exchange's with a
    /// place not watched) before its window ends: it leaves at once, with what waited behind it,
    /// and another waiting half keeps waiting.
    func testAFromGivenUpOnLeavesAtOnceInOrder() {
        var pairing = MovePairing(window: window)
        var out: [MovePairing.Item] = []
        pairing.push(from(5, "left"), now: 0) { out.append($0) }
        pairing.push(create("behind"), now: 1) { out.append($0) }
        pairing.push(from(6, "other"), now: 2) { out.append($0) }
        pairing.giveUp(where: { $0.cookie == 7 }) { out.append($0) }
        XCTAssertEqual(out, [], "no such half: nothing leaves")
        pairing.giveUp(where: { $0.cookie == 5 }) { out.append($0) }
        XCTAssertEqual(out, [.event(from(5, "left")), .event(create("behind"))])
        XCTAssertEqual(pairing.deadline, 2 + window)
    }

    func testUnmatchedToIsAMoveIn() {
        var pairing = MovePairing(window: window)
        var out: [MovePairing.Item] = []
        pairing.push(to(9, "arrived"), now: 0) { out.append($0) }
        XCTAssertEqual(out, [.event(to(9, "arrived"))])
    }

    func testInterleavedRenamesPairByCookie() {
        var pairing = MovePairing(window: window)
        var out: [MovePairing.Item] = []
        pairing.push(from(1, "a"), now: 0) { out.append($0) }
        pairing.push(from(2, "b"), now: 0) { out.append($0) }
        pairing.push(to(2, "B"), now: 0) { out.append($0) }
        XCTAssertEqual(out, [], "the first rename is still open, so the second waits behind it")
        pairing.push(to(1, "A"), now: 0) { out.append($0) }
        XCTAssertEqual(
            out, [.move(from: from(1, "a"), to: to(1, "A")), .move(from: from(2, "b"), to: to(2, "B"))])
    }

    func testLaterDeadlineWaitsForItsOwnTime() {
        var pairing = MovePairing(window: window)
        var out: [MovePairing.Item] = []
        pairing.push(from(1, "a"), now: 0) { out.append($0) }
        pairing.push(from(2, "b"), now: 500) { out.append($0) }
        pairing.expire(now: window) { out.append($0) }
        XCTAssertEqual(out, [.event(from(1, "a"))])
        XCTAssertEqual(pairing.deadline, 500 + window)
        pairing.expire(now: 500 + window) { out.append($0) }
        XCTAssertEqual(out, [.event(from(1, "a")), .event(from(2, "b"))])
    }

    func testHoldLimitGivesUpOnTheOldestFrom() {
        var pairing = MovePairing(window: window, holdLimit: 3)
        var out: [MovePairing.Item] = []
        pairing.push(from(1, "a"), now: 0) { out.append($0) }
        for index in 0..<3 { pairing.push(create("\(index)"), now: 0) { out.append($0) } }
        XCTAssertEqual(out, [.event(from(1, "a")), .event(create("0")), .event(create("1")), .event(create("2"))])
        XCTAssertTrue(pairing.isEmpty)
    }

    func testFlushReleasesEverything() {
        var pairing = MovePairing(window: window)
        var out: [MovePairing.Item] = []
        pairing.push(from(1, "a"), now: 0) { out.append($0) }
        pairing.push(create("b"), now: 0) { out.append($0) }
        pairing.flush { out.append($0) }
        XCTAssertEqual(out, [.event(from(1, "a")), .event(create("b"))])
    }

    func testLongRunsStayInOrder() {
        var pairing = MovePairing(window: window)
        var out: [MovePairing.Item] = []
        for cookie in UInt32(1)...2_000 {
            pairing.push(from(cookie, "f\(cookie)"), now: 0) { out.append($0) }
            pairing.push(create("c\(cookie)"), now: 0) { out.append($0) }
        }
        for cookie in UInt32(1)...2_000 { pairing.push(to(cookie, "t\(cookie)"), now: 0) { out.append($0) } }
        XCTAssertEqual(out.count, 4_000)
        for cookie in 1...2_000 {
            XCTAssertEqual(
                out[2 * cookie - 2],
                .move(from: from(UInt32(cookie), "f\(cookie)"), to: to(UInt32(cookie), "t\(cookie)")))
            XCTAssertEqual(out[2 * cookie - 1], .event(create("c\(cookie)")))
        }
    }
}
