/// The time of the read or deadline the router is handling: the loop's monotonic time (settling
/// and pairing time changes by it), and the wall clock, read once per read (the events of one
/// read share it), for kept snapshots.
struct ReadTime {
    var now: UInt64 = 0
    var wall = Snapshot.Time(seconds: 0, nanoseconds: 0)
    /// The monotonic time of the read the wall clock was read for.
    var wallRead: UInt64 = .max
}
