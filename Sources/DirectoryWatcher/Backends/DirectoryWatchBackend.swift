/// What the router asks of a backend that watches directories one at a time: inotify, the tests'
/// in-memory backend, and any other (a kqueue backend would be one: a folder under `Backends/`
/// with a type conforming to this, and its reader in the event loop).
///
/// The backend numbers each directory it watches. Its events (``BackendEvent``) carry that
/// number, and the watch table keeps which watchers each number serves. Watching one directory
/// twice gives the same number, with the events asked for added, never narrowed: narrowing means
/// watching its path again, and by then the path may name another directory. The event loop
/// reads what the backend delivers and hands each event to the router (``Router/receive(_:now:)``).
///
/// Every call may come from any thread: a tree's large levels are watched on every core.
protocol DirectoryWatchBackend: Sendable {
    /// Watches the directory at `path` for `events` (``EventMask`` bits; what a directory's own
    /// end says is always reported), following a symbolic link at its end when
    /// `followingLinks`. Refused with the cause (`ENOTDIR` for a file, `ENOENT`, `EACCES`, the
    /// watch limit's `ENOSPC`).
    func watch(_ path: FileSystemPath, events: UInt32, followingLinks: Bool) throws(SyscallError) -> Int32

    /// Watches the directory open as `directory`, whatever its path names by now: the watch is
    /// then on exactly the directory a listing through the same descriptor reads, even when it
    /// is renamed between the two.
    func watch(openDirectory directory: Int32, events: UInt32) throws(SyscallError) -> Int32

    /// Stops watching the directory numbered `descriptor`. One the backend stopped watching
    /// already (the directory is gone, and the notice of it, ``EventMask/ignored``, is still to
    /// be read) needs nothing more.
    func unwatch(_ descriptor: Int32)
}
