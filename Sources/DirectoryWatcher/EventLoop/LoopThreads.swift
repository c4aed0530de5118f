import Glibc
import Synchronization

/// The threads of one loop, and the standby among them.
///
/// A loop starts with one thread, which leads. The first callback that may block starts a second,
/// the standby, which ticks while callbacks run and parks (no timeout, no wake-ups) once nothing
/// has run for a while. When the standby takes the lead from a leader stuck in a callback, the next
/// callback the new leader runs starts a new standby; the old leader, once its callback returns,
/// finishes that watcher's deliveries and then stands by, or exits if a standby is already there.
/// So the loop has one thread while it has run no such callback, two while it has, and one more
/// for each callback blocked at the same time.
///
/// Threads are joined when the loop stops, except one still inside a callback, which could be
/// waiting for the thread that stops the loop: it detaches itself when its callback returns.
final class LoopThreads: @unchecked Sendable {
    enum Role { case leading, standby, deposed, finished }

    /// How often a standby looks at the leader, and so about how long a callback may block the
    /// reading of the kernel queue before another thread takes it over (between one and two ticks).
    static let tickNanoseconds: UInt64 = 10_000_000
    /// Quiet ticks before a standby parks.
    static let ticksBeforeParking = 25

    private enum Standby { case none, ticking, parked }

    private let lock = Lock()
    private var members: [UInt: (handle: pthread_t, role: Role)] = [:]
    private var standby = Standby.none
    /// The loop has closed its descriptors: standbys and threads that finish a callback leave.
    private var closed = false
    /// Threads detach themselves as they finish (the loop was stopped from one of them, or has
    /// been joined already).
    private var detachesOnFinish = false
    /// Opens once ``joinAll()`` has joined every finished thread.
    private let joined = Latch()
    /// Read by the leader before each callback that may block: a standby is awake, nothing to do.
    private let standbyAwake = Atomic<Bool>(false)

    private static var currentThread: UInt { UInt(bitPattern: Int(bitPattern: pthread_self())) }

    /// Every loop thread of the process that has been started and has not finished.
    static let running = Registry()

    /// For tests and diagnostics: a thread's name alone does not tell which threads are the
    /// loops', since a thread that a loop thread starts (a Dispatch worker) inherits its name
    /// until it sets its own.
    final class Registry: @unchecked Sendable {
        private let lock = Lock()
        private var threads: Set<UInt> = []

        var count: Int { lock.withLock { threads.count } }

        fileprivate func insert(_ thread: UInt) {
            lock.withLock { _ = threads.insert(thread) }
        }

        fileprivate func remove(_ thread: UInt) {
            lock.withLock {
                threads.remove(thread)
                lock.broadcast()
            }
        }

        /// Returns once at most `limit` loop threads are running.
        func waitUntil(atMost limit: Int) {
            lock.withLock {
                while threads.count > limit { lock.wait() }
            }
        }
    }

    var isMember: Bool { lock.withLock { members[Self.currentThread] != nil } }

    /// Starts a thread with `create` and records it with `role`, before the thread can look for
    /// itself. False when no thread could be started.
    func start(_ role: Role, create: () -> pthread_t?) -> Bool {
        lock.withLock {
            guard let handle = create() else { return false }
            record(handle, role)
            return true
        }
    }

    /// Under `lock`, before the new thread can look for itself.
    private func record(_ handle: pthread_t, _ role: Role) {
        let key = UInt(bitPattern: Int(bitPattern: handle))
        members[key] = (handle, role)
        Self.running.insert(key)
    }

    // MARK: - The leader

    /// Before a callback that may block (after `Leadership.enterCallback()`): makes sure a standby
    /// is awake, starting one with `start` when there is none. Costs one atomic load unless the
    /// standby is parked or missing.
    func ensureStandby(start: () -> pthread_t?) {
        guard !standbyAwake.load(ordering: .sequentiallyConsistent) else { return }
        lock.withLock {
            switch standby {
            case .ticking:
                return
            case .parked:
                standby = .ticking
                lock.broadcast()
            case .none:
                // At the thread limit the loop goes on without a standby; the next callback tries again.
                guard let handle = start() else { return }
                record(handle, .standby)
                standby = .ticking
            }
            standbyAwake.store(true, ordering: .sequentiallyConsistent)
        }
    }

    // MARK: - The standby

    /// Waits one tick; false when the loop has closed.
    func tick() -> Bool {
        lock.withLock {
            if !closed { lock.wait(nanoseconds: Self.tickNanoseconds) }
            return !closed
        }
    }

    /// Parks until a leader needs a standby again; false when the loop has closed. `stillQuiet`
    /// reads the phase again after the standby has said it sleeps, so a callback that started
    /// meanwhile (and saw the standby awake) is not missed.
    func park(stillQuiet: () -> Bool) -> Bool {
        lock.withLock {
            standby = .parked
            standbyAwake.store(false, ordering: .sequentiallyConsistent)
            if !stillQuiet() {
                standby = .ticking
                standbyAwake.store(true, ordering: .sequentiallyConsistent)
            }
            while standby == .parked && !closed { lock.wait() }
            return !closed
        }
    }

    /// The standby has taken the lead: there is no standby until the next callback starts one, and
    /// the thread it took the lead from is deposed now, not when its callback returns (stopping the
    /// loop must not wait for that callback, which may be waiting for the thread that stops it).
    func standbyLeads() {
        lock.withLock {
            standby = .none
            standbyAwake.store(false, ordering: .sequentiallyConsistent)
            for (key, member) in members where member.role == .leading { members[key]?.role = .deposed }
            members[Self.currentThread]?.role = .leading
            lock.broadcast()
        }
    }

    // MARK: - Any member

    /// A deposed leader is done with the callback that was stuck: true when it is to stand by,
    /// false when it is to exit (a standby is there already, or the loop has closed).
    func deposedLeaderIsFree() -> Bool {
        lock.withLock {
            guard !closed, standby == .none else { return false }
            standby = .ticking
            standbyAwake.store(true, ordering: .sequentiallyConsistent)
            members[Self.currentThread]?.role = .standby
            return true
        }
    }

    func setRole(_ role: Role) {
        lock.withLock { members[Self.currentThread]?.role = role }
    }

    /// The calling thread's last act.
    func finish() {
        Self.running.remove(Self.currentThread)
        lock.withLock {
            let me = Self.currentThread
            if detachesOnFinish {
                if let member = members.removeValue(forKey: me) { pthread_detach(member.handle) }
            } else {
                members[me]?.role = .finished
            }
            lock.broadcast()
        }
    }

    // MARK: - Stopping

    /// The loop has closed its descriptors: wakes the standby, which leaves.
    func close() {
        lock.withLock {
            closed = true
            lock.broadcast()
        }
    }

    /// From outside the loop's threads, once the loop has closed: waits for the leader and the
    /// standby to finish and joins every finished thread. A thread still in a callback (it was
    /// deposed) is not waited for, since the callback may be waiting for the caller: it detaches
    /// itself when the callback returns.
    func joinAll() {
        let finished = lock.withLock { () -> [pthread_t] in
            while members.values.contains(where: { $0.role == .leading || $0.role == .standby }) { lock.wait() }
            detachesOnFinish = true
            let done = members.filter { $0.value.role == .finished }
            for key in done.keys { members[key] = nil }
            return done.values.map(\.handle)
        }
        for handle in finished {
            let result = pthread_join(handle, nil)
            precondition(result == 0, "joining a loop thread failed with error \(result)")
        }
        joined.open()
    }

    /// For tests: the process's running loop threads and this loop's deposed ones, in one
    /// moment. Under `lock` no thread joins the registry and no role changes; a thread may leave
    /// the registry (it finishes), which only lowers the first count.
    func census() -> (running: Int, deposed: Int) {
        lock.withLock {
            (Self.running.count, members.values.count(where: { $0.role == .deposed }))
        }
    }

    /// Whether ``joinAll()`` has returned.
    var isJoined: Bool { joined.isOpened }

    /// Returns once ``joinAll()`` has returned.
    func waitUntilJoined() {
        joined.wait()
    }
}
