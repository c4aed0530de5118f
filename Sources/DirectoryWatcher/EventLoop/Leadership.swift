import CDirectoryWatcherShims
import Glibc
import Synchronization

/// Which of a loop's threads leads (reads the kernel queue, routes, runs callbacks), and how a
/// standby takes the lead from a leader stuck in a callback.
///
/// The phase is even while the leader runs the library's code and odd while it runs a callback
/// that may block. Leaving the callback and taking over are the same compare-and-exchange, odd `p`
/// to `p + 1`: exactly one of the leader (its callback returned) and the standby (it saw the
/// same callback running at two ticks) wins. The winner leads; the loser never touches the loop's
/// state again unless it wins a later exchange. Each thread keeps the phase it entered with in a
/// thread-local, so a deposed leader compares against its own value, never its successor's.
final class Leadership: Sendable {
    /// Stored by a thread that lost the lead, in its thread-local.
    private static let deposed = UInt64.max

    private let phase = Atomic<UInt64>(0)
    private let leader = Atomic<UInt>(0)

    private static var currentThread: UInt { UInt(bitPattern: Int(bitPattern: pthread_self())) }

    /// The calling thread leads (and was not deposed in the callback it is running).
    var isCurrentThreadLeader: Bool {
        leader.load(ordering: .acquiring) == Self.currentThread && cdw_leader_phase() != Self.deposed
    }

    /// The first thread, at start; its phase is even.
    func lead() {
        cdw_set_leader_phase(phase.load(ordering: .acquiring))
        leader.store(Self.currentThread, ordering: .releasing)
    }

    /// Leader: a callback that may block starts. Sequentially consistent, with the standby's
    /// parking: after this store the leader reads whether a standby is awake, while a standby
    /// about to park reads the phase after saying so; one of them sees the other.
    func enterCallback() {
        let entered = phase.load(ordering: .relaxed) + 1
        cdw_set_leader_phase(entered)
        phase.store(entered, ordering: .sequentiallyConsistent)
    }

    /// Leader: the callback returned. False when a standby took the lead meanwhile.
    func leaveCallback() -> Bool {
        let entered = cdw_leader_phase()
        let left = phase.compareExchange(
            expected: entered, desired: entered + 1, ordering: .acquiringAndReleasing
        ).exchanged
        cdw_set_leader_phase(left ? entered + 1 : Self.deposed)
        return left
    }

    /// Leader inside a callback that must run library code inline (a callback making a watcher):
    /// leaves the callback's phase if it still leads. Returns false when it no longer leads; true
    /// otherwise, and the caller then calls ``resume(_:)`` with `inCallback`.
    func pause() -> (leads: Bool, inCallback: Bool) {
        guard isCurrentThreadLeader else { return (false, false) }
        guard cdw_leader_phase() & 1 == 1 else { return (true, false) }
        return leaveCallback() ? (true, true) : (false, false)
    }

    func resume(inCallback: Bool) {
        if inCallback { enterCallback() }
    }

    /// What a standby watches: the phase now.
    func observe() -> UInt64 {
        phase.load(ordering: .sequentiallyConsistent)
    }

    /// Standby: takes the lead from a leader still in the callback it was in at `observed`.
    func takeOver(from observed: UInt64) -> Bool {
        guard
            phase.compareExchange(expected: observed, desired: observed + 1, ordering: .acquiringAndReleasing)
                .exchanged
        else { return false }
        cdw_set_leader_phase(observed + 1)
        leader.store(Self.currentThread, ordering: .releasing)
        return true
    }
}

/// A standby's decision at each tick, from the phases it observed. Pure, so tests drive it.
struct StallWatch {
    enum Decision: Equatable {
        /// The leader has been in one callback since the last tick: take the lead.
        case takeOver(UInt64)
        /// Nothing has happened for `ticksBeforeParking` ticks: sleep until woken.
        case park
        case wait
    }

    let ticksBeforeParking: Int
    private var last: UInt64?
    private var quietTicks = 0

    init(ticksBeforeParking: Int) {
        self.ticksBeforeParking = ticksBeforeParking
    }

    mutating func tick(phase: UInt64) -> Decision {
        defer { last = phase }
        guard phase == last else {
            quietTicks = 0
            return .wait
        }
        if phase & 1 == 1 { return .takeOver(phase) }
        quietTicks += 1
        return quietTicks >= ticksBeforeParking ? .park : .wait
    }

    /// After parking or leading: the next tick starts afresh.
    mutating func reset() {
        last = nil
        quietTicks = 0
    }
}
