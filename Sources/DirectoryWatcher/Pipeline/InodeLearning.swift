/// When the router lists the names of the kept directories whose entries' inodes it lacks (an
/// entry an event created: the event gives no inode), so that a rescan can follow such a file to
/// a new name; or, when those are a few among many entries, reads a status for each of them
/// (``Router/entriesPerStatus``). Pure, with the loop's monotonic clock passed in; loop thread only.
///
/// Not at once, and not at a barrier: a listing costs as much as the directory is large. Once
/// the loop has been idle for ``idle``, or, under a steady stream of events, ``latest`` after the
/// first such entry; and never sooner than fifty times what the last listing took after it (at
/// least 20 ms), so that listing a huge directory, however often files appear in it, takes at
/// most 2% of the loop's time.
struct InodeLearning {
    static let idle: UInt64 = 100_000_000
    static let latest: UInt64 = 2_000_000_000
    static let leastSpacing: UInt64 = 20_000_000

    /// The directories to list, by watch descriptor.
    private(set) var due: Set<Int32> = []
    /// When the first of ``due`` joined, and when the last event was read.
    private var since: UInt64 = 0
    private var lastEventRead: UInt64 = 0
    /// The least time after ``lastListing`` before the next.
    private var spacing: UInt64 = 0
    private var lastListing: UInt64 = 0

    var isEmpty: Bool { due.isEmpty }

    /// When the listing is due; nil while no directory lacks inodes.
    var deadline: UInt64? {
        if due.isEmpty { return nil }
        return max(min(lastEventRead + Self.idle, since + Self.latest), lastListing + spacing)
    }

    /// An event was read at `now`.
    mutating func eventRead(at now: UInt64) { lastEventRead = now }

    /// The directory of `wd` has entries with no inode on record.
    mutating func add(_ wd: Int32) {
        if due.isEmpty { since = lastEventRead }
        due.insert(wd)
    }

    /// The directory of `wd` is no longer kept.
    mutating func remove(_ wd: Int32) { due.remove(wd) }

    /// The directories were listed (at `now`, when the schedule called for it): `stillDue` still
    /// lack inodes (born in the listing's clock tick), and the listing took `took` nanoseconds.
    mutating func listed(stillDue: Set<Int32>, took: UInt64, at now: UInt64?) {
        due = stillDue
        since = lastEventRead
        // At least a few kernel ticks: entries born in the listing's tick wait for the next.
        spacing = max(Self.leastSpacing, took.multipliedReportingOverflow(by: 50).overflow ? .max : took * 50)
        if let now { lastListing = now }
    }
}
