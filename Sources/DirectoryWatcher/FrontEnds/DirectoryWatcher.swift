import Dispatch
import Glibc

/// Watches one directory and tells a delegate, at once, when its entries change.
///
/// ```swift
/// final class Documents: DirectoryWatcherDelegate {
///     var watcher: DirectoryWatcher?
///
///     func start() throws {
///         watcher = try DirectoryWatcher.watchFolder(path: "/srv/uploads", delegate: self)
///     }
///
///     func directoryDidChange(_ watcher: DirectoryWatcher) {
///         reloadFileList()
///     }
/// }
/// ```
///
/// The shape is that of Apple's DirectoryWatcher sample: a factory, a weakly held delegate, and
/// ``invalidate()``. Underneath, all watchers of a process share one event-loop thread blocked in
/// `epoll_wait` over one inotify descriptor; it starts with the first watcher and stops with the
/// last.
///
/// A watcher reports the entries of its directory, not of subdirectories' contents; pass
/// ``Options`` to choose which kinds of change, and use ``watchFile(path:options:delegate:queue:)``
/// to watch one file so that the watch survives the file being replaced. A watcher can be
/// invalidated from any thread; dropping the last reference invalidates it too.
public final class DirectoryWatcher: @unchecked Sendable {
    /// The watched directory's absolute path, or for a file watch the file's (relative paths are
    /// resolved against the current directory when watching starts; symbolic links are kept as
    /// given).
    public let path: FileSystemPath

    /// What the watcher was asked to report.
    public let options: Options

    private let subscription: Subscription
    let lease: LoopLease
    private let lock = Lock()
    // Under `lock`.
    private weak var weakDelegate: (any DirectoryWatcherDelegate)?
    /// For the closure form, which has no owner to keep its delegate alive.
    private var retainedDelegate: (any DirectoryWatcherDelegate)?

    /// The delegate, held weakly. Setting it takes effect from the next batch.
    public var delegate: (any DirectoryWatcherDelegate)? {
        get { lock.withLock { weakDelegate } }
        set { lock.withLock { weakDelegate = newValue } }
    }

    /// Whether the watcher still delivers changes: false after ``invalidate()``, and after the
    /// watched directory (for a file watch, the file's directory) was removed or moved.
    public var isValid: Bool { subscription.gate.isOpen }

    private init(path: FileSystemPath, options: Options, subscription: Subscription, lease: LoopLease) {
        self.path = path
        self.options = options
        self.subscription = subscription
        self.lease = lease
    }

    deinit {
        invalidate()
    }

    /// Starts watching the directory at `path`; callbacks run on the library's threads (see
    /// ``Delivery/automatic``).
    ///
    /// - Parameters:
    ///   - path: A directory, absolute or relative to the current directory.
    ///   - delegate: Told about changes; held weakly.
    /// - Throws: ``DirectoryWatcherError``, naming the path and the cause.
    public static func watchFolder(path: String, delegate: any DirectoryWatcherDelegate) throws(DirectoryWatcherError)
        -> DirectoryWatcher
    {
        try make(path: path, delegate: delegate, queue: nil)
    }

    /// Starts watching the directory at `path`; callbacks run on `queue`.
    ///
    /// Callbacks of one watcher never overlap and come in kernel order, even on a concurrent
    /// queue: each watcher delivers through a serial queue that targets `queue`. Pass
    /// `DispatchQueue.main` to be called on the main thread, as the sample's run-loop source was
    /// (the main queue must be serviced: `dispatchMain()`, a run loop, or an app framework).
    public static func watchFolder(
        path: String, delegate: any DirectoryWatcherDelegate, queue: DispatchQueue
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(path: path, delegate: delegate, queue: queue)
    }

    /// Starts watching the directory at `path` and calls `handler` with each batch of changes.
    ///
    /// The watcher keeps `handler` alive until it is invalidated. Keep the watcher: dropping it
    /// stops the watch.
    public static func watchFolder(
        path: String, queue: DispatchQueue? = nil,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(path: path, delegate: ClosureDelegate(handler), retainingDelegate: true, queue: queue)
    }

    /// Starts watching the directory at `path` for the changes `options` selects.
    ///
    /// ```swift
    /// let options = DirectoryWatcher.Options(events: [.created, .removed])
    /// watcher = try DirectoryWatcher.watchFolder(path: "/srv/uploads", options: options, delegate: self)
    /// ```
    ///
    /// - Parameters:
    ///   - path: A directory, absolute or relative to the current directory.
    ///   - options: What to report; the default reports what ``watchFolder(path:delegate:)`` does.
    ///   - delegate: Told about changes; held weakly.
    ///   - queue: Where callbacks run, as in ``watchFolder(path:delegate:queue:)``; nil for where
    ///     `options.delivery` says (by default the library's threads).
    /// - Throws: ``DirectoryWatcherError``, naming the path and the cause.
    public static func watchFolder(
        path: String, options: Options, delegate: any DirectoryWatcherDelegate, queue: DispatchQueue? = nil
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(path: path, options: options, delegate: delegate, queue: queue)
    }

    /// Starts watching the directory at `path` for the changes `options` selects, and calls
    /// `handler` with each batch. The watcher keeps `handler` alive until it is invalidated.
    public static func watchFolder(
        path: String, options: Options, queue: DispatchQueue? = nil,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(
            path: path, options: options, delegate: ClosureDelegate(handler), retainingDelegate: true, queue: queue)
    }

    /// Starts watching one file, by name, so that the watch survives the file being replaced.
    ///
    /// ```swift
    /// watcher = try DirectoryWatcher.watchFile(path: "/etc/myapp/config.toml", delegate: self)
    /// ```
    ///
    /// Editors and configuration tools save a file atomically: they write a new file next to it
    /// and rename it over the old one. A watch on the file's inode would end there, watching a
    /// file that no longer has a name. This watch instead watches the file's directory for the
    /// file's name, so it reports every file that bears the name, one after the other:
    ///
    /// | What happens to the file | What is reported (``DirectoryChange/path`` is `path`) |
    /// |---|---|
    /// | written, attributes changed | ``DirectoryChange/Kind/modified``, ``DirectoryChange/Kind/attributesChanged`` |
    /// | replaced by a rename in its directory (an atomic save) | ``DirectoryChange/Kind/renamed``, ``DirectoryChange/oldPath`` the replacement's old path |
    /// | renamed away within its directory | ``DirectoryChange/Kind/renamed`` with ``DirectoryChange/oldPath`` `path` and the new path in ``DirectoryChange/path`` |
    /// | moved in from, or out to, another directory | ``DirectoryChange/Kind/movedIn``, ``DirectoryChange/Kind/movedOut`` |
    /// | removed | ``DirectoryChange/Kind/removed`` |
    /// | created again, after a removal or a move away | ``DirectoryChange/Kind/created`` |
    ///
    /// The watch goes on after a removal or a move away, and reports the next file of that name.
    /// It ends only with its directory: when the directory is removed or moved, the watcher
    /// reports ``DirectoryChange/Kind/rootRemoved`` or ``DirectoryChange/Kind/rootMoved`` with the
    /// directory's path and stops itself.
    ///
    /// The file need not exist yet; its directory must. When `path` is a symbolic link, it is
    /// followed once, when watching starts (as the kernel follows a watched directory's link), and
    /// the watch then follows the name the link points to; changes still carry `path`. Writes
    /// through another hard link in another directory are not seen, since only the name is
    /// watched.
    ///
    /// - Parameters:
    ///   - path: The file, absolute or relative to the current directory.
    ///   - options: What to report; by default, the same kinds as a directory watch.
    ///   - delegate: Told about changes; held weakly.
    ///   - queue: Where callbacks run, as in ``watchFolder(path:delegate:queue:)``; nil for where
    ///     `options.delivery` says (by default the library's threads).
    /// - Throws: ``DirectoryWatcherError``, naming the path and the cause: the directory is
    ///   missing or not a directory, or `path` names no entry of a directory (`/`).
    public static func watchFile(
        path: String, options: Options = Options(), delegate: any DirectoryWatcherDelegate,
        queue: DispatchQueue? = nil
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(path: path, options: options, watchesFile: true, delegate: delegate, queue: queue)
    }

    /// Starts watching one file by name, as ``watchFile(path:options:delegate:queue:)`` does, and
    /// calls `handler` with each batch. The watcher keeps `handler` alive until it is invalidated.
    public static func watchFile(
        path: String, options: Options = Options(), queue: DispatchQueue? = nil,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(
            path: path, options: options, watchesFile: true, delegate: ClosureDelegate(handler),
            retainingDelegate: true, queue: queue)
    }

    static func make(
        path: String, options: Options = Options(), watchesFile: Bool = false, delegate: any DirectoryWatcherDelegate,
        retainingDelegate: Bool = false, queue: DispatchQueue?, loop: EventLoop? = nil
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        // Before a loop is started for nothing.
        guard !path.isEmpty else { throw DirectoryWatcherError(code: .emptyPath, path: path) }
        if let problem = options.settling?.problem {
            throw DirectoryWatcherError(code: .invalidOption, path: path, detail: problem)
        }
        let lease: LoopLease
        do throws(SyscallError) {
            if let loop {
                lease = LoopLease(dedicated: loop)
            } else {
                lease = LoopLease(shared: try SharedEventLoop.acquire())
            }
        } catch {
            throw DirectoryWatcherError(error, path: path)
        }
        let absolute: FileSystemPath
        var root: FileSystemPath
        var entry: WatchedEntry?
        do throws(DirectoryWatcherError) {
            let resolution = PathResolution(system: lease.loop.system)
            absolute = try resolution.absolute(path)
            root = absolute
            if watchesFile {
                let (directory, name) = try resolution.fileEntry(absolute, given: path)
                root = directory
                entry = WatchedEntry(name: name, path: absolute)
            }
        } catch {
            lease.release()
            throw error
        }
        let label = "DirectoryWatcher \(absolute)"
        let target: Subscription.Target
        switch (options.delivery, queue) {
        case (.automatic, let queue?), (.queue, let queue?):
            target = .queue(DispatchQueue(label: label, target: queue))
        case (.queue, nil):
            target = .queue(DispatchQueue(label: label))
        case (.automatic, nil):
            target = .mailbox(Mailbox(mayBlock: true))
        case (.eventLoopThread, nil):
            target = .mailbox(Mailbox(mayBlock: false))
        case (.eventLoopThread, _?):
            preconditionFailure("a queue and Delivery.eventLoopThread exclude each other")
        }
        let settler = options.settling.map {
            Settler(
                quietPeriod: $0.quietPeriod.nanoseconds, maximumWait: $0.maximumWait.nanoseconds,
                reportedMask: options.events.inotifyMask, listsRemovedContents: $0.listsRemovedContents)
        }
        let subscription = Subscription(
            root: root, mask: options.events.inotifyMask, entry: entry, target: target,
            keepsSnapshot: options.recovery == .exact, recursive: options.recursive && !watchesFile,
            exclusions: Exclusions(options.excludes), followsLinks: options.followsSymbolicLinks, settler: settler)
        let watcher = DirectoryWatcher(path: absolute, options: options, subscription: subscription, lease: lease)
        watcher.delegate = delegate
        // The closure forms have no owner to keep their delegate alive: the watcher does.
        if retainingDelegate { watcher.lock.withLock { watcher.retainedDelegate = delegate } }
        subscription.receiver = watcher
        let subscribed = lease.loop.submitAndWait { loop in
            // What the kernel queued before this watcher joined is not its news: read it first,
            // for the watchers already there. (A directory other watchers watch already is
            // watched by the same kernel watch, whose queued events would otherwise reach this
            // one too: a `created` for an entry that existed before it started.)
            loop.readQueuedEvents()
            return loop.router.subscribeDeferringListing(subscription)
        }
        switch subscribed {
        case .some(.success(let request)):
            if let request {
                // The first listing of a kept directory, read here rather than on the loop: a
                // directory of 100,000 entries takes about half a second, which holds up this
                // caller alone.
                let snapshot = try? Snapshot.read(request.path, system: lease.loop.system)
                _ = lease.loop.submitAndWait { loop in loop.router.install(snapshot, for: request) }
            }
            return watcher
        case .some(.failure(let failure)):
            watcher.invalidate()
            throw DirectoryWatcherError(failure, path: path)
        case nil:
            // The lease keeps a shared loop running; only a loop made for a test and already shut
            // down by it refuses the task.
            preconditionFailure("a watcher was made on an event loop that had been shut down")
        }
    }

    /// The directories this watcher watches now: its own, and for a recursive watcher
    /// (``Options/recursive``) every directory of its tree under its current path, in no
    /// particular order. Empty once the watch has ended (invalidated, or its directory removed).
    /// Safe from any thread; it waits for the event loop to answer.
    public func watchedDirectories() -> [FileSystemPath] {
        let subscription = subscription
        return lease.loop.submitAndWait { _ in
            if subscription.loop.isEnded { return [] }
            if let tree = subscription.loop.tree { return tree.descriptors.compactMap { tree.node($0)?.path } }
            return [subscription.root]
        } ?? []
    }

    /// Stops watching. Idempotent, and safe from any thread, inside any watcher's callback too.
    ///
    /// When it returns, no callback of this watcher will start. What it waits for depends on
    /// where it is called:
    ///
    /// | Called from | When it returns |
    /// |---|---|
    /// | outside every callback of this library | no callback of this watcher is running: one in progress on another thread has finished |
    /// | inside a callback or barrier completion of any watcher, or on the loop thread | at once, without waiting: a callback of this watcher already running on another thread may still finish |
    ///
    /// Inside a callback it never waits, because the callback it would wait for may be waiting
    /// for this one (two watchers invalidating each other from their callbacks would deadlock).
    /// Only a wait the library cannot see remains the caller's to avoid: from outside callbacks,
    /// do not call it while holding what a callback of this watcher waits for (a lock it takes,
    /// the thread it calls `DispatchQueue.sync` on). To learn when a callback that was running has
    /// finished, call ``barrier(_:)`` after this: its completion runs on the watcher's queue
    /// behind it.
    ///
    /// The kernel watch is removed when no other watcher of this process watches the same
    /// directory; with the process's last watcher, the loop thread and its descriptors go too.
    public func invalidate() {
        invalidate(waiting: true)
    }

    /// Stops watching; `waiting` false never waits for a callback in progress (an async
    /// sequence's termination runs while Swift's runtime holds a lock that a delivery needs).
    func invalidate(waiting: Bool) {
        guard subscription.gate.close(waiting: waiting) else { return }
        lease.loop.execute { [subscription] loop in loop.router.unsubscribe(subscription) }
        lease.release()
        lock.withLock { retainedDelegate = nil }
    }

    /// Calls `completion` on the watcher's queue once every change that happened before this call
    /// has been delivered.
    ///
    /// Nothing is written into the watched directory: the loop writes to a private file that its
    /// own inotify instance watches, and the kernel queues that event behind every change already
    /// queued. On an invalidated watcher, `completion` still runs, so nothing waits forever.
    public func barrier(_ completion: @escaping @Sendable () -> Void) {
        let subscription = subscription
        let accepted = lease.loop.execute { loop in
            loop.router.requestBarrier(for: subscription, completion: completion)
        }
        guard !accepted else { return }
        // The loop has stopped (this watcher was invalidated, and was the last): the completion
        // runs behind any callback of this watcher still running.
        switch subscription.target {
        case .queue(let queue):
            queue.async { CallbackContext.run(completion) }
        case .mailbox(let mailbox):
            if mailbox.append(completion) {
                DispatchQueue.global().async { CallbackContext.run { mailbox.drain() } }
            }
        }
    }

    /// Returns once every change that happened before this call has been delivered.
    public func barrier() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            barrier { continuation.resume() }
        }
    }

    /// Lists the watched directory's names now to learn the inodes of entries that events
    /// created, as the loop does once it has been idle (tests rely on it without waiting for an
    /// idle moment).
    func learnInodesNow() {
        _ = lease.loop.submitAndWait { loop in loop.router.learnInodesNow() }
    }
}

extension DirectoryWatcher: ChangeReceiver {
    func receive(_ changes: [DirectoryChange], through gate: DeliveryGate) {
        guard let delegate else { return }
        delegate.directoryWatcher(self, didObserve: changes)
        guard gate.isOpen else { return }
        delegate.directoryDidChange(self)
    }

    func rootWentAway() {
        invalidate()
    }
}

/// Adapts a closure to the delegate protocol for the closure form of `watchFolder`.
private final class ClosureDelegate: DirectoryWatcherDelegate, Sendable {
    let handler: @Sendable ([DirectoryChange]) -> Void

    init(_ handler: @escaping @Sendable ([DirectoryChange]) -> Void) {
        self.handler = handler
    }

    func directoryDidChange(_ watcher: DirectoryWatcher) {}

    func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) {
        handler(changes)
    }
}

extension DirectoryWatcher: CustomStringConvertible {
    public var description: String { "DirectoryWatcher(\(path)\(isValid ? "" : ", invalidated"))" }
}

extension Duration {
    /// Whole nanoseconds, clamped to what a `UInt64` holds (negative: zero).
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        let (total, carry) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
        return overflow || carry ? .max : total
    }
}
