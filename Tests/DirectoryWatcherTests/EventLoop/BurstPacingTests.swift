import Dispatch
import Glibc
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The loop's pacing under a stream of events: the rule by hand, then a loop over the real
/// kernel whose reads are cut to one event each, so that a stream is many wake-ups whatever the
/// machine's speed.
final class BurstPacingTests: XCTestCase {
    private let close: UInt64 = 2_000
    private let far: UInt64 = 3_000_000

    func testALoneChangeIsReadAtOnceEveryTime() {
        var pacing = BurstPacing()
        for _ in 0..<100 {
            pacing.wokeUp(waited: far, events: 4)
            XCTAssertNil(pacing.pauseBefore(timeout: -1), "changes milliseconds apart: no pause")
        }
    }

    func testAStreamPacesFromItsThirdWakeUpInARow() {
        var pacing = BurstPacing()
        pacing.wokeUp(waited: far, events: 3)  // the stream's first change
        pacing.wokeUp(waited: close, events: 2)
        XCTAssertFalse(pacing.isPacing, "a change whose events came in two wake-ups")
        pacing.wokeUp(waited: BurstPacing.streamGap, events: 1)
        XCTAssertTrue(pacing.isPacing)
        XCTAssertEqual(pacing.pauseBefore(timeout: -1), BurstPacing.pause)
        XCTAssertEqual(pacing.pauseBefore(timeout: 30_000), 30_000, "never past the loop's next deadline")
        XCTAssertNil(pacing.pauseBefore(timeout: 0), "work to do now: no pause")
        // Each pause gathered a batch: still a stream.
        for _ in 0..<10 { pacing.wokeUp(waited: 0, events: BurstPacing.gatheredToGoOn, afterPause: true) }
        XCTAssertTrue(pacing.isPacing)
    }

    /// A writer that makes its next change once the last was reported (a test, a benchmark's
    /// ping-pong): a pause gathers that one change, and would only delay each; it ends pacing.
    func testAPauseThatGathersLessThanABatchEndsIt() {
        var pacing = BurstPacing()
        for _ in 0..<3 { pacing.wokeUp(waited: 0, events: 2) }
        XCTAssertTrue(pacing.isPacing)
        pacing.wokeUp(waited: 0, events: BurstPacing.gatheredToGoOn - 1, afterPause: true)
        XCTAssertFalse(pacing.isPacing)
        XCTAssertNil(pacing.pauseBefore(timeout: -1))
        // And such a writer's changes are never found queued: the count never starts again.
        for _ in 0..<100 { pacing.wokeUp(waited: 12_000, events: 2) }
        XCTAssertFalse(pacing.isPacing)
    }

    func testAWaitLongerThanTheGapStartsTheCountAgain() {
        var pacing = BurstPacing()
        pacing.wokeUp(waited: close, events: 1)
        pacing.wokeUp(waited: close, events: 1)
        pacing.wokeUp(waited: BurstPacing.streamGap + 1, events: 1)
        pacing.wokeUp(waited: close, events: 1)
        XCTAssertFalse(pacing.isPacing, "two in a row since the long wait")
        pacing.wokeUp(waited: close, events: 1)
        XCTAssertTrue(pacing.isPacing)
    }

    func testAPauseThatFindsNothingOrAWakeUpWithoutEventsEndsIt() {
        var pacing = BurstPacing()
        for _ in 0..<3 { pacing.wokeUp(waited: 0, events: 1) }
        XCTAssertTrue(pacing.isPacing)
        pacing.pauseFoundNothing()
        XCTAssertFalse(pacing.isPacing)
        XCTAssertNil(pacing.pauseBefore(timeout: -1), "an idle loop never pauses")
        pacing.wokeUp(waited: 0, events: 1)
        pacing.wokeUp(waited: 0, events: 1)
        XCTAssertFalse(pacing.isPacing, "the count starts again")
        pacing.wokeUp(waited: 0, events: 1)
        XCTAssertTrue(pacing.isPacing)
        pacing.wokeUp(waited: 0, events: 0)  // a task or a deadline
        XCTAssertFalse(pacing.isPacing)
        for _ in 0..<3 { pacing.wokeUp(waited: 0, events: 1) }
        pacing.wokeUp(waited: 0, events: 0, afterPause: true)  // a task came during the pause
        XCTAssertFalse(pacing.isPacing)
    }

    /// A loop whose reads of the inotify queue take a few events each, held while a stream is
    /// queued: the stream is then several wake-ups, each finding events at once. It paces, and every
    /// change still arrives, the last one too with nothing after it to wake the loop.
    func testALoopPacesAStreamAndDeliversEveryChangeOfIt() throws {
        let directory = TemporaryDirectory()
        let inotifyFD = LockedValue<Int32>(-1)
        var calls = SystemCalls.live
        let live = SystemCalls.live
        calls.inotifyInit1 = { flags in
            let fd = live.inotifyInit1(flags)
            inotifyFD.set(fd)
            return fd
        }
        calls.read = { fd, buffer, count in
            guard fd == inotifyFD.get() else { return live.read(fd, buffer, count) }
            // Room for a few events (one of the longest name): the kernel returns whole events.
            return live.read(fd, buffer, min(count, 16 + Int(NAME_MAX) + 1))
        }
        // A clock that stands still: no wait for events is ever longer than the gap, whatever
        // the machine's load (the rule's timing is the tests above').
        let clock = ManualClock()
        let loop = try EventLoop(system: System(calls), clock: { clock.now })
        defer { loop.shutdown() }
        let files = 30
        let last = directory.url("f\(files - 1)")
        let allCame = expectation(description: "the stream's last change")
        let created = LockedValue<Set<String>>([])
        let delegate = ClosureRecorder { changes in
            for change in changes where change.kind == .created {
                let path = change.path.string!
                created.update { $0.insert(path) }
                if path == last { allCame.fulfill() }
            }
        }
        let watcher = try DirectoryWatcher.make(
            path: directory.path, options: .init(delivery: .eventLoopThread), delegate: delegate, queue: nil,
            loop: loop)
        defer { watcher.invalidate() }
        // The leader held in a task while the files are made: their events are all queued
        // when it reads again, however fast this thread and the loop's are.
        let (held, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        _ = loop.execute { _ in
            held.signal()
            release.wait()
        }
        held.wait()
        for index in 0..<files { directory.touch("f\(index)") }
        release.signal()
        wait(for: [allCame], timeout: 180)
        XCTAssertEqual(created.get(), Set((0..<files).map { directory.url("f\($0)") }))
        waitForDelivery(watcher)
        let paused = expectation(description: "the loop's count of pauses")
        let pauses = LockedValue(0)
        _ = loop.execute { loop in
            pauses.set(loop.pausesTaken)
            paused.fulfill()
        }
        wait(for: [paused], timeout: 180)
        XCTAssertGreaterThan(pauses.get(), 0, "a stream of \(files) events, a few a read")
    }
}
