import DirectoryWatcher
import Glibc
import XCTest

@testable import DirWatchCLI

/// `--exec`'s timing, driven by hand: a clock that moves only when the test says, processes that
/// end only when the test says.
final class ExecControllerTests: XCTestCase {
    /// Runs scheduled work when the test moves its clock past the work's time.
    private final class ManualScheduler: ExecScheduler, @unchecked Sendable {
        private(set) var now = 0.0
        private var work: [(due: Double, order: Int, run: @Sendable () -> Void)] = []
        private var order = 0

        func after(_ seconds: Double, _ run: @escaping @Sendable () -> Void) {
            order += 1
            work.append((now + seconds, order, run))
        }

        /// Moves the clock by `seconds`, running what falls due on the way, in order.
        func advance(by seconds: Double) {
            let end = now + seconds
            while let next = work.filter({ $0.due <= end }).min(by: { ($0.due, $0.order) < ($1.due, $1.order) }) {
                work.removeAll { $0.order == next.order }
                now = next.due
                next.run()
            }
            now = end
        }
    }

    /// Records what the controller asks for; its processes end when the test calls `exit`.
    private final class FakeHost: ExecHost {
        var launches: [ExecBatch] = []
        var signals: [(pid: pid_t, signal: Int32)] = []
        var onceStatus: Int32?
        var stoppedKilled: Bool?
        var failLaunches = false

        func launch(_ batch: ExecBatch) -> pid_t? {
            launches.append(batch)
            return failLaunches ? nil : pid_t(100 + launches.count)
        }

        func signal(_ pid: pid_t, _ signal: Int32) { signals.append((pid, signal)) }
        func onceFinished(status: Int32) { onceStatus = status }
        func stopped(killed: Bool) { stoppedKilled = killed }
    }

    private let scheduler = ManualScheduler()
    private let host = FakeHost()

    private func controller(_ configure: (inout ExecController.Configuration) -> Void = { _ in })
        -> ExecController
    {
        var configuration = ExecController.Configuration()
        configure(&configuration)
        return ExecController(configuration: configuration, host: host, scheduler: scheduler)
    }

    private func created(_ path: FileSystemPath) -> DirectoryChange {
        DirectoryChange(kind: .created, path: path, isDirectory: false)
    }

    private func attributes(_ path: FileSystemPath) -> DirectoryChange {
        DirectoryChange(kind: .attributesChanged, path: path, isDirectory: false)
    }

    private var sent: [Int32] { host.signals.map(\.signal) }

    func testRunsAtStartWithAnEmptyBatchUnlessPostponed() {
        controller().start()
        XCTAssertEqual(host.launches, [ExecBatch()])

        let postponed = FakeHost()
        ExecController(configuration: .init(postpone: true), host: postponed, scheduler: scheduler).start()
        ExecController(configuration: .init(once: true), host: postponed, scheduler: scheduler).start()
        XCTAssertEqual(postponed.launches, [], "--postpone, and --once, wait for a change")
    }

    /// `--state`: what changed since the state is delivered before the start; the start's run
    /// gets it at once (no empty run first, no window), and nothing runs again for it.
    func testChangesBeforeTheStartAreTheStartsRun() {
        let exec = controller()
        exec.submit([created("/d/while-stopped")])
        XCTAssertEqual(host.launches, [], "nothing runs before the start")
        exec.start()
        XCTAssertEqual(host.launches.count, 1)
        XCTAssertEqual(host.launches.first?.paths, ["/d/while-stopped"])
        scheduler.advance(by: 10)
        XCTAssertEqual(host.launches.count, 1, "the window opened before the start runs nothing")
    }

    /// A touch is a creation and a change of attributes, which may come in two batches: one run,
    /// the path once in DIRWATCH_PATHS, both changes on stdin.
    func testChangesWithinTheWindowAreOneRunWithEachPathOnce() {
        let exec = controller { $0.postpone = true }
        exec.start()
        exec.submit([created("/d/a")])
        scheduler.advance(by: 0.03)
        exec.submit([attributes("/d/a"), attributes("/d/a")])
        XCTAssertEqual(host.launches, [], "the window is open")
        scheduler.advance(by: 0.019)
        XCTAssertEqual(host.launches, [])
        scheduler.advance(by: 0.001)
        XCTAssertEqual(host.launches.count, 1, "50 ms after the first change")
        XCTAssertEqual(host.launches.first?.paths, ["/d/a"])
        XCTAssertEqual(
            host.launches.first?.changes, [created("/d/a"), attributes("/d/a")], "the repeat is left out")
        scheduler.advance(by: 10)
        XCTAssertEqual(host.launches.count, 1, "nothing more")
    }

    /// Only a repeat of the same path's last change is left out: a file made, removed and made
    /// again keeps all three.
    func testPendingBatchKeepsChangesThatAreNotRepeats() {
        var pending = PendingBatch()
        let removed = DirectoryChange(kind: .removed, path: "/d/a", isDirectory: false)
        for change in [created("/d/a"), created("/d/b"), removed, created("/d/a"), created("/d/a"), created("/d/b")] {
            pending.add(change)
        }
        let batch = pending.take()
        XCTAssertEqual(
            batch.changes, [created("/d/a"), created("/d/b"), removed, created("/d/a")],
            "b's second creation repeats its last change, though a's came between")
        XCTAssertEqual(batch.paths, ["/d/a", "/d/b"])
        XCTAssertTrue(pending.isEmpty)
    }

    func testZeroDebounceRunsAtOnce() {
        let exec = controller {
            $0.postpone = true
            $0.debounce = 0
        }
        exec.start()
        exec.submit([created("/d/a")])
        XCTAssertEqual(host.launches.map(\.paths), [["/d/a"]])
    }

    /// Runs never overlap: what comes during a run waits for its end, as one batch.
    func testChangesDuringARunWaitForItsEnd() {
        let exec = controller()
        exec.start()
        exec.submit([created("/d/a")])
        scheduler.advance(by: 1)
        exec.submit([created("/d/b")])
        scheduler.advance(by: 1)
        XCTAssertEqual(host.launches.count, 1, "the run at start goes on")
        XCTAssertEqual(host.signals.count, 0)
        exec.exited(101, status: 0)
        XCTAssertEqual(host.launches.count, 2)
        XCTAssertEqual(host.launches.last?.paths, ["/d/a", "/d/b"])
    }

    /// A batch whose window is still open when the run ends waits for the window.
    func testABatchStillGatheringWhenARunEndsWaitsForItsWindow() {
        let exec = controller()
        exec.start()
        exec.submit([created("/d/a")])
        exec.exited(101, status: 0)
        XCTAssertEqual(host.launches.count, 1)
        scheduler.advance(by: 0.05)
        XCTAssertEqual(host.launches.map(\.paths), [[], ["/d/a"]])
    }

    /// --restart: a ready batch stops the run with SIGTERM, SIGKILL after the grace period, and
    /// the next run starts only once it has ended.
    func testRestartEscalatesToSIGKILLBeforeTheNextRun() {
        let exec = controller {
            $0.restart = true
            $0.grace = 2
        }
        exec.start()
        exec.submit([created("/d/a")])
        XCTAssertEqual(host.signals.count, 0, "not before the window closes")
        scheduler.advance(by: 0.05)
        XCTAssertEqual(host.signals.map(\.pid), [101])
        XCTAssertEqual(sent, [SIGTERM])
        exec.submit([created("/d/b")])
        scheduler.advance(by: 1.9)
        XCTAssertEqual(sent, [SIGTERM], "no second SIGTERM, no SIGKILL yet")
        scheduler.advance(by: 0.1)
        XCTAssertEqual(sent, [SIGTERM, SIGKILL])
        XCTAssertEqual(host.launches.count, 1, "still going until it has ended")
        exec.exited(101, status: 128 + SIGKILL)
        XCTAssertEqual(host.launches.last?.paths, ["/d/a", "/d/b"])

        // A run that ends on SIGTERM is not killed later, and its grace timer does not touch the
        // next run.
        exec.submit([created("/d/c")])
        scheduler.advance(by: 0.05)
        exec.exited(102, status: 128 + SIGTERM)
        scheduler.advance(by: 10)
        XCTAssertEqual(host.signals.map(\.pid), [101, 101, 102])
        XCTAssertEqual(sent, [SIGTERM, SIGKILL, SIGTERM])
        XCTAssertEqual(host.launches.count, 3)
    }

    func testStopWithNothingRunningIsDoneAtOnce() {
        let exec = controller { $0.postpone = true }
        exec.start()
        exec.submit([created("/d/a")])
        exec.stop()
        XCTAssertEqual(host.stoppedKilled, false)
        scheduler.advance(by: 1)
        XCTAssertEqual(host.launches, [], "what was pending is dropped")
    }

    func testStopThatEndsWithinTheGracePeriod() {
        let exec = controller()
        exec.start()
        exec.stop()
        XCTAssertEqual(sent, [SIGTERM])
        XCTAssertNil(host.stoppedKilled, "not until the run has ended")
        exec.exited(101, status: 128 + SIGTERM)
        XCTAssertEqual(host.stoppedKilled, false)
        scheduler.advance(by: 10)
        XCTAssertEqual(sent, [SIGTERM])
    }

    func testStopKillsARunThatOutlivesTheGracePeriod() {
        let exec = controller { $0.grace = 5 }
        exec.start()
        exec.stop()
        exec.submit([created("/d/a")])
        scheduler.advance(by: 4.9)
        XCTAssertEqual(sent, [SIGTERM])
        scheduler.advance(by: 0.1)
        XCTAssertEqual(sent, [SIGTERM, SIGKILL])
        exec.exited(101, status: 128 + SIGKILL)
        XCTAssertEqual(host.stoppedKilled, true)
        XCTAssertEqual(host.launches.count, 1, "nothing runs after a stop")
    }

    func testASecondStopKillsAtOnce() {
        let exec = controller { $0.grace = 1000 }
        exec.start()
        exec.stop()
        exec.stop()
        XCTAssertEqual(sent, [SIGTERM, SIGKILL])
        exec.stop()
        XCTAssertEqual(sent, [SIGTERM, SIGKILL], "killed once")
        exec.exited(101, status: 128 + SIGKILL)
        XCTAssertEqual(host.stoppedKilled, true)
    }

    func testZeroGraceKillsAtOnce() {
        let exec = controller { $0.grace = 0 }
        exec.start()
        exec.stop()
        XCTAssertEqual(sent, [SIGTERM, SIGKILL])
    }

    /// With --once: one batch, one run, its status; what comes meanwhile is not run.
    func testOnceRunsTheFirstBatchAndReportsItsStatus() {
        let exec = controller { $0.once = true }
        exec.start()
        exec.submit([created("/d/a")])
        scheduler.advance(by: 0.05)
        exec.submit([created("/d/b")])
        scheduler.advance(by: 0.05)
        exec.exited(101, status: 7)
        XCTAssertEqual(host.onceStatus, 7)
        XCTAssertEqual(host.launches.map(\.paths), [["/d/a"]])

        let failing = FakeHost()
        failing.failLaunches = true
        let cannotRun = ExecController(configuration: .init(once: true), host: failing, scheduler: scheduler)
        cannotRun.start()
        cannotRun.submit([created("/d/a")])
        scheduler.advance(by: 0.05)
        XCTAssertEqual(failing.onceStatus, 127, "a command that cannot start")
    }

    // MARK: - What a run leaves behind

    /// A run whose first process ends while a process it started goes on (a server started in
    /// the background) goes on for it, without --restart too: nothing is signalled until a batch
    /// is ready; then it is stopped, SIGKILL after the grace period, and the next run starts only
    /// once all of it has ended.
    func testWhatARunLeavesBehindIsStoppedBeforeTheNextRun() {
        let exec = controller { $0.grace = 2 }
        exec.start()
        exec.exited(101, status: 0, othersRemain: true)
        scheduler.advance(by: 10)
        XCTAssertEqual(host.signals.count, 0, "left running while nothing is ready")
        exec.submit([created("/d/a")])
        scheduler.advance(by: 0.05)
        XCTAssertEqual(host.signals.map(\.pid), [101])
        XCTAssertEqual(sent, [SIGTERM])
        scheduler.advance(by: 2)
        XCTAssertEqual(sent, [SIGTERM, SIGKILL])
        XCTAssertEqual(host.launches.count, 1, "not while any of it is left")
        exec.othersEnded()
        XCTAssertEqual(host.launches.map(\.paths), [[], ["/d/a"]])

        // Ended within the grace period: no SIGKILL, and the next run's timer is its own.
        exec.exited(102, status: 0, othersRemain: true)
        exec.submit([created("/d/b")])
        scheduler.advance(by: 0.05)
        exec.othersEnded()
        scheduler.advance(by: 10)
        XCTAssertEqual(sent, [SIGTERM, SIGKILL, SIGTERM])
        XCTAssertEqual(host.launches.count, 3)
    }

    /// A stop reaches what a run left behind, and is done once all of it has ended.
    func testAStopStopsWhatARunLeftBehind() {
        let exec = controller { $0.grace = 1000 }
        exec.start()
        exec.exited(101, status: 0, othersRemain: true)
        exec.stop()
        XCTAssertEqual(sent, [SIGTERM])
        XCTAssertNil(host.stoppedKilled)
        exec.stop()
        XCTAssertEqual(sent, [SIGTERM, SIGKILL], "a second stop kills at once")
        exec.othersEnded()
        XCTAssertEqual(host.stoppedKilled, true)

        // A run whose first process ends while it is being stopped, its other processes still
        // ending: the stop waits for them.
        let second = FakeHost()
        let other = ExecController(configuration: .init(grace: 1000), host: second, scheduler: scheduler)
        other.start()
        other.stop()
        other.exited(101, status: 128 + SIGTERM, othersRemain: true)
        XCTAssertNil(second.stoppedKilled)
        XCTAssertEqual(second.signals.map(\.signal), [SIGTERM], "its SIGTERM reached every process already")
        other.othersEnded()
        XCTAssertEqual(second.stoppedKilled, false)
    }

    /// With --once, the one run's status is told once what it left behind has been stopped.
    func testOnceStopsWhatTheRunLeftBehindBeforeItsStatus() {
        let exec = controller {
            $0.once = true
            $0.grace = 1
        }
        exec.start()
        exec.submit([created("/d/a")])
        scheduler.advance(by: 0.05)
        exec.exited(101, status: 3, othersRemain: true)
        XCTAssertEqual(sent, [SIGTERM])
        XCTAssertNil(host.onceStatus)
        exec.othersEnded()
        XCTAssertEqual(host.onceStatus, 3, "the first process's status")
    }

    /// The host's word that everything ended counts only after the first process has.
    func testOthersEndedBeforeTheFirstProcessChangesNothing() {
        let exec = controller()
        exec.start()
        exec.othersEnded()
        exec.submit([created("/d/a")])
        scheduler.advance(by: 0.05)
        XCTAssertEqual(host.launches.count, 1, "the first run goes on")
        XCTAssertEqual(host.signals.count, 0)
    }

    /// Changes seen before the watches were all in place wait for the start.
    func testNothingRunsBeforeTheStart() {
        let exec = controller { $0.postpone = true }
        exec.submit([created("/d/a")])
        scheduler.advance(by: 1)
        XCTAssertEqual(host.launches, [])
        exec.start()
        XCTAssertEqual(host.launches.map(\.paths), [["/d/a"]])
    }

    /// DIRWATCH_PATHS only when it fits: one string under 128 KiB, everything under the bound.
    func testPathsGoInTheEnvironmentOnlyWhenTheyFit() {
        let inherited = ["HOME=/home/u", "DIRWATCH_PATHS=stale", "DIRWATCH_COUNT=9"]
        let small = ExecEnvironment.variables(
            inherited: inherited, argv: ["make"], paths: ["/d/a", "/d/b\nc"], totalLimit: 1 << 20)
        XCTAssertEqual(small, ["HOME=/home/u", "DIRWATCH_COUNT=2", "DIRWATCH_PATHS=/d/a\n/d/b\\nc"])
        XCTAssertEqual(
            ExecEnvironment.variables(inherited: [], argv: ["make"], paths: [], totalLimit: 1 << 20),
            ["DIRWATCH_COUNT=0", "DIRWATCH_PATHS="], "at start: set, and empty")

        // "DIRWATCH_PATHS=" and 1,000 paths: 131,071 bytes, 128 KiB with its NUL, the most one
        // string may be; then one byte more.
        var longest = (0..<999).map { FileSystemPath("/" + String(repeating: "x", count: 125) + String(1000 + $0)) }
        let used = "DIRWATCH_PATHS=".utf8.count + longest.reduce(0) { $0 + $1.bytes.count + 1 }
        longest.append(FileSystemPath("/" + String(repeating: "y", count: 128 * 1024 - 1 - used - 1)))
        let fits = ExecEnvironment.variables(inherited: [], argv: ["make"], paths: longest, totalLimit: 1 << 20)
        XCTAssertEqual(fits.last?.utf8.count, 128 * 1024 - 1)
        XCTAssertEqual(fits.last.map { String($0.prefix(16)) }, "DIRWATCH_PATHS=/")
        longest[999] = FileSystemPath(bytes: longest[999].bytes + [UInt8(ascii: "y")])
        XCTAssertEqual(
            ExecEnvironment.variables(inherited: [], argv: ["make"], paths: longest, totalLimit: 1 << 20),
            ["DIRWATCH_COUNT=1000"])

        // The whole bound: a big environment leaves no room for the paths.
        let big = ["BIG=" + String(repeating: "b", count: 100_000)]
        let paths: [FileSystemPath] = (0..<1000).map { FileSystemPath("/d/file-\($0)") }
        XCTAssertEqual(
            ExecEnvironment.variables(inherited: big, argv: ["make"], paths: paths, totalLimit: 100_000),
            big + ["DIRWATCH_COUNT=1000"])
        XCTAssertEqual(
            ExecEnvironment.variables(inherited: big, argv: ["make"], paths: paths, totalLimit: 200_000).count, 3)
        XCTAssertGreaterThanOrEqual(ExecEnvironment.totalLimit, 128 * 1024)
    }
}
