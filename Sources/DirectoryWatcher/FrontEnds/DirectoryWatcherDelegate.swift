/// The object a ``DirectoryWatcher`` tells about changes, as in Apple's DirectoryWatcher sample.
///
/// Implement ``directoryDidChange(_:)`` to be told that something changed, as the sample did, and
/// list the directory again. Implement ``directoryWatcher(_:didObserve:)`` as well, or instead, to
/// receive the changes themselves. Both run on the watcher's queue (see
/// ``DirectoryWatcher/watchFolder(path:delegate:queue:)``), one batch at a time, in the order the
/// kernel reported the changes: first `didObserve` with the batch, then `directoryDidChange`.
///
/// The watcher holds its delegate weakly, as the sample did: keep the delegate alive yourself.
public protocol DirectoryWatcherDelegate: AnyObject {
    /// Something in the watched directory changed.
    func directoryDidChange(_ watcher: DirectoryWatcher)

    /// The changes since the previous batch, oldest first. The default implementation does nothing.
    ///
    /// A batch holds what the watcher read from the kernel in one go, so a burst of changes
    /// arrives together. It can end with ``DirectoryChange/Kind/rootRemoved`` or
    /// ``DirectoryChange/Kind/rootMoved``, after which the watcher has stopped itself.
    func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange])
}

extension DirectoryWatcherDelegate {
    public func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) {}
}
