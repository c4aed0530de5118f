import Dispatch

/// What the test kit (`DirectoryWatcherTesting`) needs of a watcher and nothing else does: a
/// watcher made on a loop of its own (the kit's simulated kernel), and the batches a watcher
/// hands its delegate, seen as the delegate sees them.
extension DirectoryWatcher {
    /// Starts watching `path` on `loop`, as ``watchFolder(path:options:delegate:queue:)`` does
    /// on the process's shared loop.
    @_spi(DirectoryWatcherTesting)
    public static func watchFolder(
        path: String, options: Options = Options(), delegate: any DirectoryWatcherDelegate,
        queue: DispatchQueue? = nil, on loop: EventLoop
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(path: path, options: options, delegate: delegate, queue: queue, loop: loop)
    }

    /// Starts watching `path` on `loop` and calls `handler` with each batch.
    @_spi(DirectoryWatcherTesting)
    public static func watchFolder(
        path: String, options: Options = Options(), queue: DispatchQueue? = nil, on loop: EventLoop,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(
            path: path, options: options, delegate: ClosureDelegate(handler), retainingDelegate: true, queue: queue,
            loop: loop)
    }

    /// Starts watching one file by name on `loop`, as ``watchFile(path:options:delegate:queue:)``
    /// does on the process's shared loop.
    @_spi(DirectoryWatcherTesting)
    public static func watchFile(
        path: String, options: Options = Options(), delegate: any DirectoryWatcherDelegate,
        queue: DispatchQueue? = nil, on loop: EventLoop
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(path: path, options: options, watchesFile: true, delegate: delegate, queue: queue, loop: loop)
    }

    /// The sequence of the changes of `path` watched on `loop`, as
    /// ``changes(path:options:bufferLimit:)`` watches it on the process's shared loop.
    @_spi(DirectoryWatcherTesting)
    public static func changes(
        path: String, options: Options = Options(), bufferLimit: Int = DirectoryChanges.defaultBufferLimit,
        on loop: EventLoop
    ) throws(DirectoryWatcherError) -> DirectoryChanges {
        try changes(path: path, options: options, bufferLimit: bufferLimit, loop: loop)
    }

    /// Calls `observer` with each batch this watcher delivers, where and when it delivers it,
    /// just before its delegate's ``DirectoryWatcherDelegate/directoryWatcher(_:didObserve:)``;
    /// until ``removeDeliveryObserver(_:)``. Returns the number to remove it by.
    @_spi(DirectoryWatcherTesting)
    public func observeDeliveries(_ observer: @escaping @Sendable ([DirectoryChange]) -> Void) -> Int {
        lock.withLock {
            nextObserver += 1
            observers[nextObserver] = observer
            return nextObserver
        }
    }

    /// Stops calling the observer numbered `number`.
    @_spi(DirectoryWatcherTesting)
    public func removeDeliveryObserver(_ number: Int) {
        _ = lock.withLock { observers.removeValue(forKey: number) }
    }
}

extension DirectoryWatcher {
    /// Runs `body` while the event loop this watcher is on reads nothing from inotify: the
    /// kernel's queue fills as it would behind a slow reader (the test kit's way to overflow it on
    /// disk). Barriers asked for meanwhile complete once it reads again. Not from a callback on the
    /// loop's thread (``Delivery/eventLoopThread``), which would wait for itself.
    @_spi(DirectoryWatcherTesting)
    public func withEventLoopHeld<Result>(_ body: () throws -> Result) rethrows -> Result {
        guard let loop = lock.withLock({ session?.lease.loop }) else { return try body() }
        _ = loop.submitAndWait { $0.holdReading(true) }
        defer { _ = loop.submitAndWait { $0.holdReading(false) } }
        return try body()
    }
}

extension DirectoryWatcher {
    /// Whether this watcher watches one file by name (``watchFile(path:options:delegate:queue:)``).
    @_spi(DirectoryWatcherTesting)
    public var isFileWatch: Bool { watchesFile }
}

extension DirectoryWatcher {
    /// The event loop this watcher is on while it watches; nil while it is stopped.
    @_spi(DirectoryWatcherTesting)
    public var eventLoop: EventLoop? { lock.withLock { session?.lease.loop } }
}
