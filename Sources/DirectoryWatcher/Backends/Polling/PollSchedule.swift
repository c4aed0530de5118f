/// When a polled watcher polls next: at most its interval after the last poll, sooner while its
/// directory is busy. After a poll that found changes the next comes after a quarter of the
/// interval (more are likely to follow, as in a copy or a build); each quiet poll doubles the
/// wait again, up to the interval. Pure: the times come from the caller's clock.
struct PollSchedule: Equatable, Sendable {
    /// The longest wait between two polls, in nanoseconds.
    let interval: UInt64
    /// The shortest: a quarter of the interval, and never under 10 ms.
    let shortest: UInt64
    /// The wait after the last poll.
    private(set) var wait: UInt64
    /// When the next poll is due (monotonic nanoseconds).
    private(set) var due: UInt64

    init(interval: UInt64, now: UInt64) {
        self.interval = max(interval, 1)
        shortest = min(self.interval, max(self.interval / 4, 10_000_000))
        wait = self.interval
        due = now &+ self.interval
    }

    /// A poll ran at `now`; `foundChanges` when it reported any.
    mutating func polled(at now: UInt64, foundChanges: Bool) {
        wait = foundChanges ? shortest : min(wait.multipliedReportingOverflow(by: 2).partialValue, interval)
        if wait < shortest { wait = shortest }
        due = now &+ wait
    }
}
