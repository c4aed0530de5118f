/// Pairs `IN_MOVED_FROM` with its `IN_MOVED_TO` through the cookie, without reordering events.
///
/// The kernel queues the two halves of a rename one after the other, but a reader can wake up
/// between them, and a concurrent change elsewhere can land between them. So a `MOVED_FROM` is
/// held, together with everything queued after it, until its `MOVED_TO` arrives (one paired move,
/// at the position of the `MOVED_FROM`) or its deadline passes (an unpaired move: the entry left
/// for a place nobody watches). Events leave in kernel order either way.
///
/// Pure and single-threaded: time comes in as `now` (nanoseconds of any monotonic clock), so tests
/// drive it by hand. The event loop passes `CLOCK_MONOTONIC` and sleeps until ``deadline``.
struct MovePairing {
    enum Item: Equatable {
        case event(BackendEvent)
        case move(from: BackendEvent, to: BackendEvent)
    }

    private enum Slot {
        case ready(Item)
        case waiting(BackendEvent, deadline: UInt64)
    }

    /// How long a `MOVED_FROM` waits for its partner, in nanoseconds.
    let window: UInt64
    /// How many events may wait behind an unpaired `MOVED_FROM` before it is given up on.
    let holdLimit: Int

    private var held: [Slot] = []
    private var head = 0

    init(window: UInt64 = 10_000_000, holdLimit: Int = 4096) {
        precondition(holdLimit > 0)
        self.window = window
        self.holdLimit = holdLimit
    }

    /// True when nothing is held back.
    var isEmpty: Bool { head == held.count }

    /// When the oldest waiting `MOVED_FROM` gives up; nil when none waits.
    var deadline: UInt64? {
        // Deadlines grow in push order, so the first waiting slot has the earliest.
        // By index: a slice of `held` would be a retain and a release of its storage at every
        // wake-up, nothing held as a rule.
        for index in head..<held.count {
            if case .waiting(_, let deadline) = held[index] { return deadline }
        }
        return nil
    }

    mutating func push(_ event: BackendEvent, now: UInt64, emit: (Item) -> Void) {
        if event.has(EventMask.movedTo), event.cookie != 0, let index = waitingIndex(cookie: event.cookie),
            case .waiting(let from, _) = held[index]
        {
            held[index] = .ready(.move(from: from, to: event))
            release(emit)
            return
        }
        if event.has(EventMask.movedFrom), event.cookie != 0 {
            held.append(.waiting(event, deadline: now &+ window))
        } else if isEmpty {
            emit(.event(event))
            return
        } else {
            held.append(.ready(.event(event)))
        }
        if held.count - head > holdLimit { giveUpOldest(emit) }
    }

    /// Gives up on every `MOVED_FROM` whose deadline is at or before `now`.
    mutating func expire(now: UInt64, emit: (Item) -> Void) {
        for index in head..<held.count {
            if case .waiting(let from, let deadline) = held[index], deadline <= now {
                held[index] = .ready(.event(from))
            }
        }
        release(emit)
    }

    /// Gives up at once on the waiting `MOVED_FROM` that `matches` says will get no partner.
    mutating func giveUp(where matches: (BackendEvent) -> Bool, emit: (Item) -> Void) {
        for index in head..<held.count {
            if case .waiting(let from, _) = held[index], matches(from) {
                held[index] = .ready(.event(from))
                release(emit)
                return
            }
        }
    }

    /// Releases everything now, unpaired halves as they are.
    mutating func flush(emit: (Item) -> Void) {
        expire(now: .max, emit: emit)
    }

    private func waitingIndex(cookie: UInt32) -> Int? {
        for index in head..<held.count {
            if case .waiting(let from, _) = held[index], from.cookie == cookie { return index }
        }
        return nil
    }

    private mutating func giveUpOldest(_ emit: (Item) -> Void) {
        for index in head..<held.count {
            if case .waiting(let from, _) = held[index] {
                held[index] = .ready(.event(from))
                break
            }
        }
        release(emit)
    }

    private mutating func release(_ emit: (Item) -> Void) {
        while head < held.count, case .ready(let item) = held[head] {
            head += 1
            emit(item)
        }
        if head == held.count {
            held.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64 && head * 2 > held.count {
            held.removeFirst(head)
            head = 0
        }
    }
}
