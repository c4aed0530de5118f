import Dispatch

/// The changes in one directory as an asynchronous sequence.
///
/// ```swift
/// for await change in try DirectoryWatcher.changes(path: "/srv/uploads") {
///     print(change)
/// }
/// // The loop ends when the directory is removed or moved (after that change).
/// ```
///
/// The sequence owns its watcher: the watch lasts while the sequence or an iterator of it exists,
/// and ends when the loop ends, its task is cancelled, or the sequence is dropped. Ending it never
/// waits for a delivery in progress, so cancelling the iterating task returns at once even while
/// changes are flowing. Changes are buffered without limit, so none is lost while the consumer
/// is busy.
public struct DirectoryChanges: AsyncSequence, Sendable {
    public typealias Element = DirectoryChange
    public typealias Failure = Never

    /// The watched directory's absolute path.
    public let path: FileSystemPath
    private let stream: AsyncStream<DirectoryChange>

    init(path: FileSystemPath, stream: AsyncStream<DirectoryChange>) {
        self.path = path
        self.stream = stream
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<DirectoryChange>.Iterator

        public mutating func next() async -> DirectoryChange? {
            await base.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator())
    }
}

extension DirectoryWatcher {
    /// Watches the directory at `path` and returns its changes as an asynchronous sequence.
    ///
    /// When the directory is removed or moved, the sequence delivers that change and ends; by
    /// then the watch has been released.
    ///
    /// ```swift
    /// // Each file once it has been written in full, a tree deep:
    /// let options = DirectoryWatcher.Options(recursive: true, settling: .init(quietPeriod: .milliseconds(300)))
    /// for await change in try DirectoryWatcher.changes(path: "/srv/uploads", options: options) {
    ///     if change.kind == .created { process(change.path) }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - path: The directory, absolute or relative to the current directory.
    ///   - options: What to report and how, as for ``DirectoryWatcher/watchFolder(path:options:delegate:queue:)``:
    ///     events, recovery, a recursive watch, excludes, settling.
    /// - Throws: ``DirectoryWatcherError``, naming the path and the cause.
    public static func changes(path: String, options: Options = Options()) throws(DirectoryWatcherError)
        -> DirectoryChanges
    {
        let (stream, continuation) = AsyncStream.makeStream(of: DirectoryChange.self, bufferingPolicy: .unbounded)
        let delegate = StreamDelegate(continuation)
        let watcher = try watchFolder(path: path, options: options, delegate: delegate)
        // Holds the watcher and its (weakly held) delegate until the sequence ends: finished,
        // cancelled, or dropped (AsyncStream cancels when its last copy and iterator go away).
        // Never waits for a delivery in progress: the runtime calls this while holding the
        // cancelled task's lock, which that delivery's `yield` may be waiting for. A batch still
        // being yielded goes into a finished stream, where it is dropped.
        continuation.onTermination = { _ in
            withExtendedLifetime(delegate) { watcher.invalidate(waiting: false) }
        }
        return DirectoryChanges(path: watcher.path, stream: stream)
    }
}

/// Feeds a watcher's batches into an AsyncStream.
private final class StreamDelegate: DirectoryWatcherDelegate, Sendable {
    private let continuation: AsyncStream<DirectoryChange>.Continuation

    init(_ continuation: AsyncStream<DirectoryChange>.Continuation) {
        self.continuation = continuation
    }

    func directoryDidChange(_ watcher: DirectoryWatcher) {}

    func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) {
        for change in changes { continuation.yield(change) }
        if changes.contains(where: ChangeTranslation.endsWatch) {
            // Release the watch first, so that a consumer whose loop has ended sees it gone. The
            // watcher has ended itself on this thread, one of the loop's, which cannot wait for
            // the loop to stop when this watcher was its last; a Dispatch worker can.
            let continuation = continuation
            DispatchQueue.global().async {
                watcher.invalidate()
                watcher.lease.waitUntilReleased()
                watcher.lease.loop.waitIfStopping()
                continuation.finish()
            }
        }
    }
}
