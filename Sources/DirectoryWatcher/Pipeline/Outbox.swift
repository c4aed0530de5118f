/// What the router hands over at the end of a wake-up (``Router/finishWakeUp(queueDrained:)``),
/// and what the loop then drains.
struct Outbox {
    /// Subscriptions with a batch collected in this wake-up, in the order they got their first
    /// change.
    var dirty: [Subscription] = []
    /// Mailboxes that blocks were appended to while idle: the loop owes each a drain.
    var ready: [Mailbox] = []
    /// Trees with directories that could not be watched for the watch limit since the batches
    /// were last handed over (``WatchedTree/unwatched``): each is told in one notice.
    var unwatchedTrees: [Subscription] = []
}
