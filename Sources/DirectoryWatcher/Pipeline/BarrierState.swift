/// Which barrier requests a write to the barrier file will satisfy. Pure; loop thread only.
///
/// A barrier is a timestamp update on a private file that the loop's inotify instance watches. The
/// kernel queues its `IN_ATTRIB` behind every event already queued, so when the loop reads it,
/// every change that happened before the write has been read too. One write is in flight at a
/// time: the kernel merges identical events at the tail of its queue, so two writes in a row
/// could come back as one and could not be told apart.
struct BarrierState<Request> {
    private(set) var inFlight: [Request] = []
    private(set) var waiting: [Request] = []
    /// Set by an overflow: events of writes made before it may be lost or still queued, so barrier
    /// events mean nothing until the queue has been drained.
    private(set) var isStale = false

    /// Adds a request; true when the caller must write to the barrier file now.
    mutating func request(_ request: Request) -> Bool {
        if inFlight.isEmpty && !isStale {
            inFlight.append(request)
            return true
        }
        waiting.append(request)
        return false
    }

    /// The barrier file's event was read. Returns the satisfied requests, and whether to write again
    /// for the requests that were waiting.
    mutating func reached() -> (satisfied: [Request], writeAgain: Bool) {
        if isStale || inFlight.isEmpty { return ([], false) }
        let satisfied = inFlight
        inFlight = waiting
        waiting = []
        return (satisfied, !inFlight.isEmpty)
    }

    /// The queue overflowed. The requests in flight were made before this point, and the caller
    /// reports the overflow (or rescans) before completing them, so they are satisfied now.
    mutating func overflowed() -> [Request] {
        let satisfied = inFlight
        inFlight = []
        isStale = true
        return satisfied
    }

    /// The kernel queue is empty and nothing is held back: every stale event has been seen.
    /// True when the caller must write for the requests that were waiting.
    mutating func drained() -> Bool {
        isStale = false
        if inFlight.isEmpty && !waiting.isEmpty {
            inFlight = waiting
            waiting = []
            return true
        }
        return false
    }

    /// Everything still pending, for shutdown.
    mutating func takeAll() -> [Request] {
        defer {
            inFlight = []
            waiting = []
        }
        return inFlight + waiting
    }
}
