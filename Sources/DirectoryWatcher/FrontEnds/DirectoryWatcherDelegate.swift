/// The object a ``DirectoryWatcher`` tells about changes, as in Apple's DirectoryWatcher sample.
///
/// Implement ``directoryDidChange(_:)`` to be told that something changed, as the sample did, and
/// list the directory again. Implement ``directoryWatcher(_:didObserve:)`` as well, or instead, to
/// receive the changes themselves: each has a default that does nothing. Both run where the watcher delivers (the library's threads, or
/// the queue given to ``DirectoryWatcher/watchFolder(path:options:delegate:queue:)``; see
/// ``DirectoryWatcher/Delivery``), one batch at a time, in the order the kernel reported the
/// changes: first `didObserve` with the batch, then `directoryDidChange`. They may take their
/// time or block: other watchers' changes keep coming meanwhile.
///
/// The watcher holds its delegate weakly, as the sample did: keep the delegate alive yourself.
///
/// The callbacks come on a thread or queue of the watcher's, not on an actor, so a conformance cannot be
/// isolated to one: `final class ViewModel: @MainActor DirectoryWatcherDelegate` is refused at
/// compile time (the protocol inherits `SendableMetatype`), where it would otherwise compile and
/// then be called off the main thread. For UI code, pass `queue: .main` and implement the
/// methods `nonisolated`, entering the main actor with `MainActor.assumeIsolated`, which checks
/// that it really runs there:
///
/// ```swift
/// @MainActor final class FolderModel: DirectoryWatcherDelegate {
///     private var watcher: DirectoryWatcher?
///     private(set) var files: [String] = []
///
///     func start(path: String) throws {
///         watcher = try DirectoryWatcher.watchFolder(path: path, delegate: self, queue: .main)
///     }
///
///     nonisolated func directoryDidChange(_ watcher: DirectoryWatcher) {
///         MainActor.assumeIsolated { reload() }
///     }
///
///     private func reload() { /* list the folder, update `files` */ }
/// }
/// ```
///
/// Or iterate ``DirectoryWatcher/changes(path:options:bufferLimit:)`` in a main-actor task: no delegate at all.
public protocol DirectoryWatcherDelegate: AnyObject, SendableMetatype {
    /// Something in the watched directory changed. The default implementation does nothing.
    func directoryDidChange(_ watcher: DirectoryWatcher)

    /// The changes since the previous batch, oldest first. The default implementation does nothing.
    ///
    /// A batch holds what the watcher read from the kernel in one go, so a burst of changes
    /// arrives together. It can end with ``DirectoryChange/Kind/rootRemoved`` or
    /// ``DirectoryChange/Kind/rootMoved``, after which the watcher has stopped itself.
    func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange])
}

extension DirectoryWatcherDelegate {
    public func directoryDidChange(_ watcher: DirectoryWatcher) {}

    public func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) {}
}
