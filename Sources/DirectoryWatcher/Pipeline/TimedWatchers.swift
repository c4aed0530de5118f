/// The watchers whose own deadlines the loop sleeps to, besides the kernel's events.
struct TimedWatchers {
    /// Settling watchers with changes waiting (``Settler``).
    var settling: [Subscription] = []
    /// Polled watchers (``Subscription/pollingInterval``).
    var polled: [Subscription] = []
}
