import DirectoryWatcher
import Glibc

/// What one run of `--exec`'s command is given: the changes for its stdin, the paths for
/// `DIRWATCH_PATHS`.
struct ExecBatch: Equatable {
    /// Every change, in order, less repeats (see ``PendingBatch/add(_:)``).
    var changes: [DirectoryChange] = []
    /// Each changed path once, in the order first seen.
    var paths: [FileSystemPath] = []
}

/// The changes gathered for the next run.
struct PendingBatch {
    private(set) var batch = ExecBatch()
    private var seen: Set<FileSystemPath> = []
    /// The last change kept for each path.
    private var last: [FileSystemPath: DirectoryChange] = [:]

    var isEmpty: Bool { batch.changes.isEmpty }

    /// Keeps `change` unless it is the same as the last one kept for its path: ten writes in a
    /// window are one `modified`, but `created`, `removed`, `created` stay three.
    mutating func add(_ change: DirectoryChange) {
        if last[change.path] == change { return }
        last[change.path] = change
        batch.changes.append(change)
        if seen.insert(change.path).inserted { batch.paths.append(change.path) }
    }

    mutating func take() -> ExecBatch {
        defer { self = PendingBatch() }
        return batch
    }
}

/// Calls back after a delay. The runner's is its queue's `asyncAfter`; a test's runs the work
/// when it moves its clock.
protocol ExecScheduler {
    /// Runs `work` once `seconds` have passed, in the same context as the controller's calls.
    func after(_ seconds: Double, _ work: @escaping @Sendable () -> Void)
}

/// What the controller asks of the world: processes started and signalled, and its ends told.
protocol ExecHost: AnyObject {
    /// Starts the command with `batch` in a process group of its own; nil (a message written)
    /// when it cannot be started.
    func launch(_ batch: ExecBatch) -> pid_t?
    /// Sends `signal` to every process of the run `pid` leads: its process group, and every
    /// process it started that left the group or its session (`setsid`, a daemon's double fork).
    func signal(_ pid: pid_t, _ signal: Int32)
    /// With `once`: the one run has ended with `status` (127 when it could not start).
    func onceFinished(status: Int32)
    /// After ``ExecController/stop()``: nothing runs any more; `killed` when the last run had to
    /// be sent SIGKILL.
    func stopped(killed: Bool)
}

/// `--exec`'s decisions: which batch a run gets, when it starts, when a run is stopped and how
/// hard. It makes no system call and reads no clock: the host starts and signals processes, the
/// scheduler calls back, so tests drive it by hand.
///
/// - The command runs once at start with an empty batch, unless `postpone` (or `once`).
/// - A batch opens a window of `debounce` seconds from its first change; what arrives until it
///   closes joins it, and the run starts when it closes. Runs never overlap: changes that arrive
///   during a run wait for its end (and join the batch whose window has closed).
/// - With `restart`, a batch ready while a run goes stops that run first.
/// - A run is stopped with SIGTERM to every process of it, and SIGKILL `grace` seconds later if
///   it has not ended; a second ``stop()`` sends SIGKILL at once.
/// - A run is over when every process of it has ended. One whose first process has ended while
///   others it started go on (a server started in the background, a daemon) goes on for them:
///   the next ready batch stops them, as `restart` stops a run, before the next run starts; a
///   stop stops them; with `once`, they are stopped before its status is told.
///
/// Not thread-safe: the runner calls it on one queue, where its scheduler's work runs too.
final class ExecController: @unchecked Sendable {
    struct Configuration: Equatable {
        var restart = false
        var postpone = false
        var once = false
        /// Seconds; 0 starts a run as soon as a batch arrives.
        var debounce = 0.05
        var grace = 5.0
    }

    private struct Run {
        let pid: pid_t
        /// Tells this run's grace timer from an earlier run's.
        let number: Int
        var terminating = false
        var killed = false
        /// The status the first process ended with, while processes it started go on.
        var leaderStatus: Int32?
    }

    private let configuration: Configuration
    private unowned let host: ExecHost
    private let scheduler: ExecScheduler

    private var started = false
    private var pending = PendingBatch()
    /// The pending batch's window is open.
    private var gathering = false
    /// Tells the current window's timer from a closed one's.
    private var window = 0
    /// The pending batch's window has closed: it runs as soon as no run goes.
    private var ready = false
    private var run: Run?
    private var runs = 0
    private var stopping = false

    init(configuration: Configuration, host: ExecHost, scheduler: ExecScheduler) {
        self.configuration = configuration
        self.host = host
        self.scheduler = scheduler
    }

    /// Once the watches are in place: the run at start, or whatever came in meanwhile.
    func start() {
        guard !started, !stopping else { return }
        started = true
        if !configuration.postpone && !configuration.once {
            guard pending.isEmpty else {
                // Changes came before the start (what changed since a saved state, `--state`):
                // the start's run is theirs, with no window to wait for.
                gathering = false
                window += 1
                ready = true
                advance()
                return
            }
            launch(ExecBatch())
        } else {
            advance()
        }
    }

    func submit(_ changes: [DirectoryChange]) {
        // With --once, the batch that ran is the only one.
        guard !stopping, !changes.isEmpty, !(configuration.once && runs > 0) else { return }
        let opensWindow = pending.isEmpty && !ready
        for change in changes { pending.add(change) }
        if opensWindow {
            if configuration.debounce > 0 {
                gathering = true
                window += 1
                let current = window
                scheduler.after(configuration.debounce) { [self] in windowClosed(current) }
                return
            }
            ready = true
        }
        advance()
    }

    private func windowClosed(_ closed: Int) {
        guard closed == window, gathering else { return }
        gathering = false
        ready = true
        advance()
    }

    /// Starts the ready batch when no run goes; with `restart`, or when what goes is only what
    /// the run's first process left behind, stops the run first.
    private func advance() {
        guard started, !stopping, ready, !pending.isEmpty else { return }
        if let run {
            if (configuration.restart || run.leaderStatus != nil) && !run.terminating { terminate() }
            return
        }
        ready = false
        launch(pending.take())
    }

    private func launch(_ batch: ExecBatch) {
        runs += 1
        guard let pid = host.launch(batch) else {
            if configuration.once { host.onceFinished(status: 127) }
            return
        }
        run = Run(pid: pid, number: runs)
    }

    /// The first process of the run `pid` has ended (and been reaped) with `status`.
    /// `othersRemain` when processes it started go on: the host then calls ``othersEnded()``
    /// once they have all ended.
    func exited(_ pid: pid_t, status: Int32, othersRemain: Bool = false) {
        guard let ended = run, ended.pid == pid else { return }
        guard !othersRemain else {
            run?.leaderStatus = status
            if configuration.once || stopping {
                // The one run's status waits for them; a stop's SIGTERM has reached them already.
                if !ended.terminating { terminate() }
            } else {
                advance()
            }
            return
        }
        finish(ended, status: status)
    }

    /// Every process the run started has ended, after its first one.
    func othersEnded() {
        guard let ended = run, let status = ended.leaderStatus else { return }
        finish(ended, status: status)
    }

    private func finish(_ ended: Run, status: Int32) {
        run = nil
        if stopping {
            host.stopped(killed: ended.killed)
        } else if configuration.once {
            host.onceFinished(status: status)
        } else {
            advance()
        }
    }

    /// Stops for good: drops what is pending, stops the run that goes (see the type's notes),
    /// then ``ExecHost/stopped(killed:)``. Called again while a run is still being stopped, it
    /// sends SIGKILL at once.
    func stop() {
        guard !stopping else {
            kill()
            return
        }
        stopping = true
        pending = PendingBatch()
        gathering = false
        ready = false
        guard let run else {
            host.stopped(killed: false)
            return
        }
        // A run stopped for --restart already has its SIGTERM and its grace period.
        if !run.terminating { terminate() }
    }

    /// SIGTERM to the run's group, and SIGKILL when the grace period is over.
    private func terminate() {
        guard let current = run else { return }
        run?.terminating = true
        host.signal(current.pid, SIGTERM)
        if configuration.grace == 0 {
            kill()
            return
        }
        scheduler.after(configuration.grace) { [self] in
            if run?.number == current.number { kill() }
        }
    }

    private func kill() {
        guard let current = run, !current.killed else { return }
        run?.killed = true
        host.signal(current.pid, SIGKILL)
    }
}
