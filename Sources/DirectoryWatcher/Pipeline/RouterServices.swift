/// What the loop gives its router: the few system calls the router makes through it (listing a
/// directory, writing the barrier file), its clocks, and the loop's own hooks. The router holds
/// no descriptor of its own; a test gives it fakes and a hand clock.
struct RouterServices {
    /// Lists a directory's names, inodes and types, calling the given function with each.
    typealias NameLister = (FileSystemPath, (ArraySlice<UInt8>, UInt64, EntryStatus.Kind) -> Void) throws(SyscallError)
        -> Void

    /// Lists a kept directory in full (``Snapshot/read(_:system:)``).
    var listDirectory: (FileSystemPath) throws(SyscallError) -> Snapshot
    /// Lists a directory in full, one entry at a time (each name in a buffer reused for the next),
    /// with no table made of it: a start from a saved state compares as it lists. Nil: through
    /// ``listDirectory``.
    var visitEntries: ((FileSystemPath, (ArraySlice<UInt8>, EntryStatus) -> Void) throws(SyscallError) -> Void)?
    /// Lists a directory's names, for their inodes.
    var listNames: NameLister
    /// Reads the inodes of a few names of a directory, one status each (``Snapshot/readInodes(of:in:system:_:)``),
    /// calling the given function with each name found. Nil: the router lists the directory instead.
    var readInodes: ((FileSystemPath, [[UInt8]], (ArraySlice<UInt8>, UInt64) -> Void) throws(SyscallError) -> Void)? =
        nil
    /// Whether a directory still lists as a snapshot of it says (``Snapshot/isUnchanged(_:since:system:)``).
    var isUnchanged: (FileSystemPath, Snapshot) throws(SyscallError) -> Bool
    /// The wall clock, read once per read for kept snapshots.
    var wallClock: () -> Snapshot.Time
    /// The clock of file birth times (``System/coarseWallClockNow()``), read before names are
    /// listed to learn inodes.
    var birthClock: () -> Snapshot.Time
    /// The loop's monotonic clock, for what happens outside a read or a deadline (a polled
    /// watcher's first schedule, a barrier's poll).
    var clock: () -> UInt64
    /// The descriptor of the loop's own barrier file, whose events are never a watcher's.
    var barrierWD: Int32
    /// Updates the barrier file's timestamps (`IN_ATTRIB` on `barrierWD`).
    var writeBarrierFile: () throws(SyscallError) -> Void
    /// Why the loop has no inotify instance, if it has none: an inotify watcher is refused.
    var inotifyUnavailable: SyscallError?
    /// Whether the calling thread is the loop's leader, the only one that may touch the router
    /// (checked in debug builds).
    var isOnLoopThread: () -> Bool
    /// Called from the delivering thread when an overflowed backlog is delivered; the loop then
    /// runs ``Router/backlogDrained(_:)`` on its leader.
    var wakeForCatchUp: @Sendable (Subscription) -> Void
    /// Reads the fanotify group until its queue is empty, routing every event.
    var drainMarks: () -> Void = {}
    /// Opens and closes the loop's poll of the mount table.
    var openMountPoll: () throws(SyscallError) -> Void = {}
    var closeMountPoll: () -> Void = {}
    /// Whether the mount table changed since the loop last polled it (the change is then the
    /// caller's to handle).
    var mountPollFired: () -> Bool = { false }
}
