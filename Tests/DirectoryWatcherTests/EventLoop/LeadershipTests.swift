import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The standby's decisions and the hand-off's exchange, without a loop.
final class LeadershipTests: XCTestCase {
    func testTheStandbyTakesOverOnlyFromOneCallbackSeenAtTwoTicks() {
        var watch = StallWatch(ticksBeforeParking: 3)
        XCTAssertEqual(watch.tick(phase: 1), .wait, "first sight of a callback")
        XCTAssertEqual(watch.tick(phase: 3), .wait, "another callback since")
        XCTAssertEqual(watch.tick(phase: 3), .takeOver(3), "the same callback a tick later")
    }

    func testTheStandbyParksAfterQuietTicksAndStartsAfreshAfterAReset() {
        var watch = StallWatch(ticksBeforeParking: 3)
        XCTAssertEqual(watch.tick(phase: 4), .wait)
        XCTAssertEqual(watch.tick(phase: 4), .wait)
        XCTAssertEqual(watch.tick(phase: 4), .wait)
        XCTAssertEqual(watch.tick(phase: 6), .wait, "callbacks ran: not quiet")
        XCTAssertEqual(watch.tick(phase: 6), .wait)
        XCTAssertEqual(watch.tick(phase: 6), .wait)
        XCTAssertEqual(watch.tick(phase: 6), .park)
        watch.reset()
        XCTAssertEqual(watch.tick(phase: 7), .wait)
        XCTAssertEqual(watch.tick(phase: 7), .takeOver(7))
    }

    func testExactlyOneOfTheLeaderAndTheStandbyWinsTheExchange() {
        let leadership = Leadership()
        let inCallback = DispatchSemaphore(value: 0)
        let takenOver = DispatchSemaphore(value: 0)
        let leaderResult = LockedValue<(left: Bool, leadsAfter: Bool)?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            leadership.lead()
            XCTAssertTrue(leadership.isCurrentThreadLeader)
            leadership.enterCallback()
            XCTAssertTrue(leadership.leaveCallback(), "nobody took over: the leader leaves its callback")
            leadership.enterCallback()
            inCallback.signal()
            takenOver.wait()
            let left = leadership.leaveCallback()
            leaderResult.set((left, leadership.isCurrentThreadLeader))
            finished.signal()
        }
        inCallback.wait()
        let observed = leadership.observe()
        XCTAssertEqual(observed & 1, 1, "the leader is in a callback")
        XCTAssertTrue(leadership.takeOver(from: observed))
        XCTAssertFalse(leadership.takeOver(from: observed), "only once")
        XCTAssertTrue(leadership.isCurrentThreadLeader)
        takenOver.signal()
        finished.wait()
        XCTAssertEqual(leaderResult.get()?.left, false, "the deposed leader's exchange fails")
        XCTAssertEqual(leaderResult.get()?.leadsAfter, false)
        // The new leader's own callbacks work as before.
        leadership.enterCallback()
        let paused = leadership.pause()
        XCTAssertTrue(paused.leads && paused.inCallback)
        leadership.resume(inCallback: true)
        XCTAssertTrue(leadership.leaveCallback())
    }
}
