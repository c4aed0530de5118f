/// Whether the loop lets events gather for a moment before its next wait, as a network card
/// coalesces interrupts.
///
/// Under a stream of changes (a checkout, a build, an unpacked archive) the loop would otherwise
/// wake for every change or two: the writer makes the next file while the loop routes the last,
/// the loop finds the queue empty, sleeps, and is woken again microseconds later. Each wake-up
/// costs a context switch, an `epoll_wait`, a `read`, and a write of whatever the watcher prints,
/// more than routing the changes it brings (Docs/benchmarks.md, "A burst read in batches").
///
/// So once ``streakToPace`` wake-ups in a row each found events already queued (the wait for them
/// lasted at most ``streamGap``: the loop is behind), the loop is pacing: before each wait it
/// pauses ``pause`` and then takes, without sleeping, what came meanwhile. A pause that gathers
/// fewer than ``gatheredToGoOn`` events ends it: the changes are not coming faster than the loop
/// takes them. That also ends it when a writer waits for each change to be reported before making
/// the next (a test, a benchmark's ping-pong), where a pause would only delay every change: there
/// a wake-up never finds the next change queued. A lone change, and the first changes of a burst,
/// are read the moment they come; a change in a sustained stream waits at most ``pause`` longer.
/// An idle loop never pauses.
///
/// Pure: the loop passes what it measured with its own clock, so tests drive it by hand.
struct BurstPacing {
    /// A wait for events at most this long, in nanoseconds, means they were already queued
    /// (`epoll_wait` returning at once takes one to three microseconds; a writer woken by the
    /// loop's report takes ten or more to make its next change).
    static let streamGap: UInt64 = 5_000
    /// Wake-ups in a row that found events that soon, before the loop paces.
    static let streakToPace = 3
    /// How long the loop lets events gather, in nanoseconds, while pacing.
    static let pause: UInt64 = 100_000
    /// The fewest events a pause must gather for the loop to go on pacing.
    static let gatheredToGoOn = 8

    private var streak = 0
    /// Whether the loop pauses before its next wait.
    private(set) var isPacing = false

    /// A wake-up read `events` events (inotify's and fanotify's) after waiting `waited`
    /// nanoseconds for the loop to wake; `afterPause`: it took what a pause gathered.
    mutating func wokeUp(waited: UInt64, events: Int, afterPause: Bool = false) {
        if afterPause {
            // Worth it only if the changes came faster than the loop would have taken them.
            if events < Self.gatheredToGoOn { pauseFoundNothing() }
            return
        }
        guard events > 0 else {
            // A task or a deadline, not the stream.
            pauseFoundNothing()
            return
        }
        streak = waited <= Self.streamGap ? streak + 1 : 1
        if streak >= Self.streakToPace { isPacing = true }
    }

    /// A pause passed and nothing was ready (or too little: the stream is over): the next event
    /// is read at once.
    mutating func pauseFoundNothing() {
        streak = 0
        isPacing = false
    }

    /// How long to pause before a wait whose timeout is `timeout` nanoseconds (-1: none; 0: the
    /// loop has work now): nil when it should not pause. Never past the loop's next deadline.
    func pauseBefore(timeout: Int64) -> UInt64? {
        guard isPacing, timeout != 0 else { return nil }
        return timeout < 0 ? Self.pause : min(UInt64(timeout), Self.pause)
    }
}
