/// The router's listings of kept directories: those owed once the kernel queue is drained (what
/// it still holds would otherwise be reported twice), those a subscribing thread is reading, and
/// those just made, whose own events come back.
struct RouterListings {
    /// The kernel queue overflowed: list every kept directory again.
    var rescanOwed = false
    /// Watchers whose backlog overflowed and has since been delivered: their directories are
    /// listed again and each gets what it missed.
    var catchUps: [Subscription] = []
    /// The watchers whose catch-up the rescan in progress reports, by watcher: what each knew of
    /// its directories when its backlog overflowed.
    var catchUpBaselines: [ObjectIdentifier: [Int32: NameTable<KnownDirectory.Known>]] = [:]
    /// Paused watchers that asked to resume and have directories to list first: each is told
    /// what changed while it was paused.
    var resumes: [Subscription] = []
    /// Kept directories whose first listing the subscribing thread is reading
    /// (``Router/subscribeDeferringListing(_:)``): what the events said of them meanwhile, to
    /// apply to the listing when it arrives.
    var pending = ByDescriptor<Router.PendingListing>()
    /// Directories just listed: their own open, read and close come back as events on them,
    /// which are the router's echo, not a watcher's change.
    var echoes: Set<Int32> = []
    /// Saves of watchers' states, each waiting for its watcher to have nothing undelivered
    /// (``Router/requestSave(of:_:)``).
    var saves: [Router.SaveRequest] = []
}
