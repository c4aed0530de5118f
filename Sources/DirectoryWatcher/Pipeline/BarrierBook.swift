/// Every barrier the router has not completed yet, each with what it waits for. Pure; loop
/// thread only.
///
/// A barrier completes once every change made before it was asked for has been handed over. What
/// that takes depends on the watcher: the barrier file's event (``BarrierState``), the rescan
/// after a kernel overflow, or one watcher's own catch-up, resuming batch or settled batch. The
/// router decides which (it knows the watchers); the book keeps the requests until then, in the
/// order they were asked for, and hands each group back once.
struct BarrierBook<Request> {
    /// What a request waits for, past the barrier file's event.
    enum Awaited: Equatable {
        /// The rescan that follows a kernel overflow (or a fanotify group's).
        case rescan
        /// The watcher's catch-up of an overflowed backlog.
        case catchUp(ObjectIdentifier)
        /// The watcher's resuming batch.
        case resume(ObjectIdentifier)
        /// The watcher's settled batch that holds the changes from before the request.
        case settling(ObjectIdentifier)

        /// The watcher it waits for, if one.
        var watcher: ObjectIdentifier? {
            switch self {
            case .rescan: return nil
            case .catchUp(let watcher), .resume(let watcher), .settling(let watcher): return watcher
            }
        }
    }

    /// The requests waiting for the barrier file's event.
    private(set) var file = BarrierState<Request>()
    private var waiting: [(request: Request, awaited: Awaited)] = []

    /// Whether nothing is waiting beyond the barrier file's event.
    var isEmpty: Bool { waiting.isEmpty }

    /// Adds a request that waits for the barrier file's event; true when the caller must write
    /// to the file now.
    mutating func request(_ request: Request) -> Bool { file.request(request) }

    /// The barrier file's event was read: the requests it satisfies, and whether to write again.
    mutating func reached() -> (satisfied: [Request], writeAgain: Bool) { file.reached() }

    /// The kernel queue is empty: true when the caller must write for the requests that waited.
    mutating func drained() -> Bool { file.drained() }

    /// The kernel queue overflowed: the requests whose write was in flight complete after the
    /// rescan (their write's event may be lost, or may come back before what it follows).
    mutating func overflowed() {
        for request in file.overflowed() { waiting.append((request, .rescan)) }
    }

    /// `request` now waits for `awaited`.
    mutating func wait(_ request: Request, for awaited: Awaited) {
        waiting.append((request, awaited))
    }

    /// The requests that waited for `awaited`, in the order they were asked for; they wait no
    /// longer.
    mutating func take(_ awaited: Awaited) -> [Request] {
        take { $0 == awaited }
    }

    /// Every request that waited for something of `watcher`'s (it is gone).
    mutating func take(allOf watcher: ObjectIdentifier) -> [Request] {
        take { $0.watcher == watcher }
    }

    /// Everything still pending, the barrier file's requests first, for shutdown.
    mutating func takeAll() -> [Request] {
        defer { waiting = [] }
        return file.takeAll() + waiting.map(\.request)
    }

    private mutating func take(where matches: (Awaited) -> Bool) -> [Request] {
        // Barriers are few, and most wait for nothing here: an empty book costs one check.
        guard !waiting.isEmpty else { return [] }
        var taken: [Request] = []
        waiting.removeAll { entry in
            guard matches(entry.awaited) else { return false }
            taken.append(entry.request)
            return true
        }
        return taken
    }
}
