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
/// waits, neither for a delivery in progress nor for the loop's thread to exit (when this was the
/// process's last watcher, a Dispatch worker joins it a moment later). So cancelling the iterating
/// task ends the iteration at once even while changes are flowing: the call to `next()` in
/// progress, or the next one, returns nil, and the changes still buffered are dropped.
///
/// ## Buffering
///
/// Changes wait in a buffer until the consumer takes them, up to a limit
/// (``defaultBufferLimit`` unless told otherwise, see
/// ``DirectoryWatcher/changes(path:options:bufferLimit:)``). A consumer that falls further behind
/// than that is never dropped from silently: the watcher stops adding to the buffer and, once the
/// consumer has taken everything in it, delivers one ``DirectoryChange/Kind/overflow`` notice
/// whose ``DirectoryChange/droppedChanges`` says how many changes it held back, then what those
/// came to: the changes it still had, then what listing the directories again found, each marked
/// ``DirectoryChange/foundByRescan`` (with ``DirectoryWatcher/Recovery/exact``, the default). Each
/// change comes once, whatever the limit: what the consumer was given, the listing does not report
/// again, and what the listing reports is not also delivered from its events. With
/// ``DirectoryWatcher/Recovery/notice``, the notice comes as soon as the buffer is full, and the
/// consumer lists the directory itself. So the buffer holds at most the limit, plus the catch-up
/// itself, however slow the consumer.
public struct DirectoryChanges: AsyncSequence, Sendable {
    public typealias Element = DirectoryChange
    public typealias Failure = Never

    /// The buffer limit unless told otherwise: 16,384 changes, the kernel's own default queue
    /// length (`fs.inotify.max_queued_events`).
    public static let defaultBufferLimit = Subscription.backlogLimit

    /// The watched directory's absolute path.
    public let path: FileSystemPath
    /// The most changes this sequence buffers for its consumer.
    public let bufferLimit: Int
    private let stream: AsyncStream<DirectoryChange>
    /// Tells the watcher that the consumer took changes: the buffer is drained by the consumer.
    private let taken: @Sendable (Int) -> Void
    /// Ends the stream, and with it the watch (an iteration whose task was cancelled).
    private let end: @Sendable () -> Void

    init(
        path: FileSystemPath, bufferLimit: Int, stream: AsyncStream<DirectoryChange>,
        taken: @escaping @Sendable (Int) -> Void, end: @escaping @Sendable () -> Void
    ) {
        self.path = path
        self.bufferLimit = bufferLimit
        self.stream = stream
        self.taken = taken
        self.end = end
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<DirectoryChange>.Iterator
        let taken: @Sendable (Int) -> Void
        let end: @Sendable () -> Void
        /// Cancelled: nil from here on, whatever the stream still holds.
        var isEnded = false

        /// The next change, or nil once the watch has ended or the iterating task is cancelled.
        /// A stream hands out what it holds before it tells a cancelled consumer it has ended;
        /// this does not: the changes still buffered when the task is cancelled are dropped.
        public mutating func next() async -> DirectoryChange? {
            guard !isEnded else { return nil }
            guard !Task.isCancelled, let change = await base.next(), !Task.isCancelled else {
                if Task.isCancelled {
                    isEnded = true
                    end()
                }
                return nil
            }
            taken(1)
            return change
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator(), taken: taken, end: end)
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
    ///   - bufferLimit: The most changes buffered for a consumer that has not taken them yet;
    ///     past it, the consumer is told it fell behind and then what it missed (see
    ///     ``DirectoryChanges``). At least 1.
    /// - Throws: ``DirectoryWatcherError``, naming the path and the cause;
    ///   ``DirectoryWatcherError/Code/invalidOption`` for a buffer limit below 1.
    public static func changes(
        path: String, options: Options = Options(), bufferLimit: Int = DirectoryChanges.defaultBufferLimit
    ) throws(DirectoryWatcherError) -> DirectoryChanges {
        try changes(path: path, options: options, bufferLimit: bufferLimit, loop: nil)
    }

    /// The sequence of `path`'s changes, watched on `loop` (nil: the process's shared loop).
    static func changes(
        path: String, options: Options, bufferLimit: Int, loop: EventLoop?
    ) throws(DirectoryWatcherError) -> DirectoryChanges {
        guard bufferLimit >= 1 else {
            throw DirectoryWatcherError(
                code: .invalidOption, path: FileSystemPath(path),
                detail: "the buffer limit must be at least 1, not \(bufferLimit)")
        }
        // Unbounded underneath: the watcher bounds it, counting a change as delivered once taken.
        let (stream, continuation) = AsyncStream.makeStream(of: DirectoryChange.self, bufferingPolicy: .unbounded)
        let delegate = StreamDelegate(continuation)
        let watcher = try make(
            path: path, options: options, delegate: delegate, queue: nil, loop: loop,
            backlog: Backlog(limit: bufferLimit, isStrict: true, acknowledgesLater: true))
        let subscription = watcher.currentSubscription
        // Holds the watcher and its (weakly held) delegate until the sequence ends: finished,
        // cancelled, or dropped (AsyncStream cancels when its last copy and iterator go away).
        // Never waits, for a delivery in progress or for the loop's threads: the runtime calls
        // this while holding the cancelled task's lock, which that delivery's `yield` may be
        // waiting for, and a cancelled iteration returns at once. A batch still being yielded
        // goes into a finished stream, where it is dropped.
        continuation.onTermination = { _ in
            withExtendedLifetime(delegate) { watcher.invalidate(waiting: false) }
        }
        return DirectoryChanges(
            path: watcher.path, bufferLimit: bufferLimit, stream: stream,
            taken: { count in subscription?.acknowledge(count) }, end: { continuation.finish() })
    }
}

/// Feeds a watcher's batches into an AsyncStream.
private final class StreamDelegate: DirectoryWatcherDelegate, Sendable {
    private let continuation: AsyncStream<DirectoryChange>.Continuation

    init(_ continuation: AsyncStream<DirectoryChange>.Continuation) {
        self.continuation = continuation
    }

    func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) {
        for change in changes { continuation.yield(change) }
        if changes.contains(where: ChangeTranslation.endsWatch) {
            // Release the watch first, so that a consumer whose loop has ended sees it gone. The
            // watcher has ended itself on this thread, one of the loop's, which cannot wait for
            // the loop to stop when this watcher was its last; a Dispatch worker can.
            let continuation = continuation
            DispatchQueue.global().async {
                watcher.invalidate()
                watcher.waitUntilLoopReleased()
                continuation.finish()
            }
        }
    }
}
