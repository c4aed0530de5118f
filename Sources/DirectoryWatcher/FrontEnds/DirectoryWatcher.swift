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
///
/// A watcher is also a ``Monitor``: one made with an initializer starts when told
/// (``startMonitoring()``), and any watcher can be stopped (``stopMonitoring()``) and started
/// again, or paused (``pause()``) and resumed (``resume()``) with what changed meanwhile told
/// in one batch. See <doc:StartingStoppingAndPausing>.
public final class DirectoryWatcher: @unchecked Sendable {
    /// The watched directory's absolute path, or for a file watch the file's (relative paths are
    /// resolved against the current directory when the watcher is made; symbolic links are kept
    /// as given). MHWDirectoryWatcher's `watchedPath`.
    ///
    /// It may be longer than PATH_MAX (4,096 bytes): such a directory is opened a few components
    /// at a time and watched through its descriptor, and changes carry their whole path. When
    /// `getcwd` cannot give a current directory that deep, the library finds its path by walking
    /// up through `..`, so `path` is still the exact absolute path.
    public let path: FileSystemPath

    /// What the watcher was asked to report.
    public let options: Options

    /// The path as the caller gave it, for errors.
    private let givenPath: String
    /// Watches one file by name (`watchFile`) rather than a directory.
    private let watchesFile: Bool
    /// Where callbacks run, the same for every start, so that a callback of an earlier start
    /// and one of the next never overlap.
    private let target: Subscription.Target
    /// A loop the caller owns (tests); nil for the process's shared loop.
    private let dedicatedLoop: EventLoop?
    /// An async sequence's buffer (``Subscription/limit``), or the default backlog.
    private let backlog: Backlog

    /// A backlog policy: the limit, and whether changes count as delivered once consumed.
    struct Backlog {
        var limit = Subscription.backlogLimit
        var isStrict = false
        var acknowledgesLater = false
    }

    /// One start's hold on the loop and its subscription.
    private final class Session: @unchecked Sendable {
        let subscription: Subscription
        let lease: LoopLease
        /// Settled once the subscribe returns (a tree that preferred fanotify and could not have
        /// it says inotify, and why); under the watcher's lock.
        var backend: BackendChoice

        init(subscription: Subscription, lease: LoopLease, backend: BackendChoice) {
            self.subscription = subscription
            self.lease = lease
            self.backend = backend
        }
    }

    private enum State: Equatable {
        case stopped
        /// The ``startMonitoring()`` call with this number is under way on some thread. (A stop
        /// and another start may come meanwhile: the number tells whose start it is.)
        case starting(UInt64)
        case running
        /// ``invalidate()``: for good.
        case invalidated
    }

    private enum PauseState {
        case none
        case paused
        /// ``resume()`` was called; the batch that ends the pause is on its way.
        case resuming
    }

    private let lock = Lock()
    // Under `lock`.
    private weak var weakDelegate: (any DirectoryWatcherDelegate)?
    /// For the closure form, which has no owner to keep its delegate alive.
    private var retainedDelegate: (any DirectoryWatcherDelegate)?
    private var state = State.stopped
    /// The number of the latest ``startMonitoring()`` call that began starting.
    private var starts: UInt64 = 0
    /// The current start's session (set while starting, too); nil while stopped.
    private var session: Session?
    /// The latest session, stopped or not: barriers of a stopped watcher complete behind its
    /// last callbacks.
    private var lastSession: Session?
    private var pauseState = PauseState.none
    /// Batches that reached a paused watcher (handed over before the pause took hold on the
    /// loop): delivered first when it resumes.
    private var stash: [DirectoryChange] = []

    /// The delegate, held weakly. Setting it takes effect from the next batch.
    public var delegate: (any DirectoryWatcherDelegate)? {
        get { lock.withLock { weakDelegate } }
        set { lock.withLock { weakDelegate = newValue } }
    }

    /// Whether the watcher delivers changes: true while it monitors (paused or not), false
    /// before it starts, after ``stopMonitoring()`` and ``invalidate()``, and after the watched
    /// directory (for a file watch, the file's directory) was removed or moved. The sample's
    /// name for ``isMonitoring``.
    public var isValid: Bool { isMonitoring }

    /// Whether the watcher is started: from a successful ``startMonitoring()`` (or a `watchFolder`
    /// factory) until ``stopMonitoring()``, ``invalidate()``, or the end of its directory.
    public var isMonitoring: Bool { lock.withLock { state == .running } }

    /// The backend the watcher uses and why (see ``Options/backend``): inotify, or polling where
    /// inotify cannot see. Nil before it starts and while it is stopped; each start chooses
    /// again.
    public var backendChoice: BackendChoice? { lock.withLock { session?.backend } }

    /// Whether the watcher is paused (``pause()``), until ``resume()`` has handed over the batch
    /// that ends the pause.
    public var isPaused: Bool { lock.withLock { pauseState != .none } }

    init(
        given path: String, options: Options, watchesFile: Bool, queue: DispatchQueue?, loop: EventLoop?,
        backlog: Backlog = Backlog()
    ) throws(DirectoryWatcherError) {
        // Before a loop is started for nothing.
        guard !path.isEmpty else { throw DirectoryWatcherError(code: .emptyPath, path: path) }
        if let problem = options.settling?.problem {
            throw DirectoryWatcherError(code: .invalidOption, path: path, detail: problem)
        }
        if options.pollingInterval <= .zero {
            throw DirectoryWatcherError(
                code: .invalidOption, path: path,
                detail: "the polling interval must be more than zero, not \(options.pollingInterval)")
        }
        let absolute = try PathResolution(system: loop?.system ?? System()).absolute(path)
        let label = "DirectoryWatcher \(absolute)"
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
        self.path = absolute
        self.givenPath = path
        self.options = options
        self.watchesFile = watchesFile
        self.dedicatedLoop = loop
        self.backlog = backlog
    }

    /// Makes a watcher of the directory at `path` that does not watch yet: it starts with
    /// ``startMonitoring()``, and can stop and start again any number of times. For a set of
    /// watchers started and stopped together (``MonitorGroup``), or a watcher made once and
    /// started when needed, as MHWDirectoryWatcher's was.
    ///
    /// ```swift
    /// let watcher = try DirectoryWatcher(path: "/srv/uploads", delegate: self)
    /// try watcher.startMonitoring()
    /// ```
    ///
    /// - Parameters:
    ///   - path: A directory, absolute or relative to the current directory now. Whether it
    ///     exists is checked when the watcher starts.
    ///   - options: What to report and how, as for ``watchFolder(path:options:delegate:queue:)``.
    ///   - delegate: Told about changes; held weakly.
    ///   - queue: Where callbacks run; nil for where `options.delivery` says.
    /// - Throws: ``DirectoryWatcherError`` for an empty path or options that cannot be used.
    public convenience init(
        path: String, options: Options = Options(), delegate: any DirectoryWatcherDelegate,
        queue: DispatchQueue? = nil
    ) throws(DirectoryWatcherError) {
        try self.init(given: path, options: options, watchesFile: false, queue: queue, loop: nil)
        self.delegate = delegate
    }

    /// Makes a watcher of the directory at `path` that calls `handler` with each batch once it
    /// is started (``startMonitoring()``). The watcher keeps `handler` alive until it is
    /// invalidated.
    public convenience init(
        path: String, options: Options = Options(), queue: DispatchQueue? = nil,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(DirectoryWatcherError) {
        try self.init(given: path, options: options, watchesFile: false, queue: queue, loop: nil)
        retain(ClosureDelegate(handler))
    }

    /// Makes a watcher of one file, by name, as ``watchFile(path:options:delegate:queue:)``
    /// watches it, that starts with ``startMonitoring()``.
    public convenience init(
        filePath: String, options: Options = Options(), delegate: any DirectoryWatcherDelegate,
        queue: DispatchQueue? = nil
    ) throws(DirectoryWatcherError) {
        try self.init(given: filePath, options: options, watchesFile: true, queue: queue, loop: nil)
        self.delegate = delegate
    }

    /// Makes a watcher of one file, by name, that calls `handler` with each batch once it is
    /// started. The watcher keeps `handler` alive until it is invalidated.
    public convenience init(
        filePath: String, options: Options = Options(), queue: DispatchQueue? = nil,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(DirectoryWatcherError) {
        try self.init(given: filePath, options: options, watchesFile: true, queue: queue, loop: nil)
        retain(ClosureDelegate(handler))
    }

    /// The closure forms have no owner to keep their delegate alive: the watcher does.
    private func retain(_ delegate: any DirectoryWatcherDelegate) {
        lock.withLock {
            weakDelegate = delegate
            retainedDelegate = delegate
        }
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
        retainingDelegate: Bool = false, queue: DispatchQueue?, loop: EventLoop? = nil,
        backlog: Backlog = Backlog()
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        let watcher = try DirectoryWatcher(
            given: path, options: options, watchesFile: watchesFile, queue: queue, loop: loop, backlog: backlog)
        if retainingDelegate { watcher.retain(delegate) } else { watcher.delegate = delegate }
        do {
            try watcher.startMonitoring()
        } catch {
            watcher.invalidate()
            throw error
        }
        return watcher
    }

    // MARK: - Starting and stopping

    /// Starts watching. Returns true when it started, false when it was watching already (or
    /// another thread's start is under way). Safe from any thread, inside callbacks too.
    ///
    /// A watcher started again after ``stopMonitoring()`` reports what changes from then on:
    /// it is told nothing of what happened while it was stopped (pause, ``pause()``, to be told
    /// that). Its directory is looked up again, so a directory removed and made again at the
    /// same path is watched.
    ///
    /// - Throws: ``DirectoryWatcherError``, naming the path and the cause: the directory is
    ///   missing, not a directory, unreadable, a limit is reached; ``DirectoryWatcherError/Code/invalidated``
    ///   after ``invalidate()``.
    @discardableResult
    public func startMonitoring() throws(DirectoryWatcherError) -> Bool {
        let start = try lock.withLock { () throws(DirectoryWatcherError) -> UInt64? in
            switch state {
            case .invalidated: throw DirectoryWatcherError(code: .invalidated, path: givenPath)
            case .starting, .running: return nil
            case .stopped:
                starts += 1
                state = .starting(starts)
                return starts
            }
        }
        guard let start else { return false }
        let session: Session
        do {
            session = try makeSession()
        } catch {
            lock.withLock { if state == .starting(start) { state = .stopped } }
            throw error
        }
        do {
            guard try subscribe(session, start: start) else { return false }
        } catch {
            let ours = lock.withLock { () -> Bool in
                guard self.session === session else { return false }
                self.session = nil
                if state == .starting(start) { state = .stopped }
                return true
            }
            if ours { end(session, waiting: true) }
            throw error
        }
        return lock.withLock { () -> Bool in
            guard self.session === session, state == .starting(start) else { return false }
            state = .running
            return true
        }
    }

    /// Stops watching, so that ``startMonitoring()`` can start again: the kernel watch is
    /// removed (unless another watcher of this process watches the same directory), and with
    /// the process's last watcher the loop's thread ends. Returns true when it stopped, false
    /// when it was not watching. What it waits for is what ``invalidate()`` waits for; a pause
    /// ends with it, and what was held for the pause is dropped.
    @discardableResult
    public func stopMonitoring() -> Bool {
        stop(waiting: true, forGood: false)
    }

    /// A hold on the loop and a subscription for one start; not yet on the loop.
    private func makeSession() throws(DirectoryWatcherError) -> Session {
        let lease: LoopLease
        do throws(SyscallError) {
            if let dedicatedLoop {
                lease = LoopLease(dedicated: dedicatedLoop)
            } else {
                lease = LoopLease(shared: try SharedEventLoop.acquire())
            }
        } catch {
            throw DirectoryWatcherError(error, path: givenPath)
        }
        var root = path
        var entry: WatchedEntry?
        if watchesFile {
            do throws(DirectoryWatcherError) {
                let (directory, name) = try PathResolution(system: lease.loop.system).fileEntry(path, given: givenPath)
                root = directory
                entry = WatchedEntry(name: name, path: path)
            } catch {
                lease.release()
                throw error
            }
        }
        let backend = chooseBackend(for: root, on: lease.loop)
        let polls = backend.kind == .polling
        let settler = options.settling.map {
            Settler(
                quietPeriod: $0.quietPeriod.nanoseconds, maximumWait: $0.maximumWait.nanoseconds,
                reportedMask: options.events.inotifyMask, listsRemovedContents: $0.listsRemovedContents,
                followsWriters: !polls)
        }
        let subscription = Subscription(
            root: root, mask: options.events.inotifyMask, entry: entry, target: target,
            keepsSnapshot: options.recovery == .exact, recursive: options.recursive && !watchesFile,
            exclusions: Exclusions(options.excludes), followsLinks: options.followsSymbolicLinks, settler: settler,
            limit: backlog.limit, strictLimit: backlog.isStrict, acknowledgesLater: backlog.acknowledgesLater,
            pollingInterval: polls ? options.pollingInterval.nanoseconds : nil,
            fanotify: backend.kind != .fanotify ? .no : options.backend == .fanotify ? .required : .preferred)
        subscription.receiver = self
        return Session(subscription: subscription, lease: lease, backend: backend)
    }

    /// Which backend watches `directory`: what the caller asked for, or for
    /// ``Backend/automatic`` what its file system allows (``FileSystemKind``).
    private func chooseBackend(for directory: FileSystemPath, on loop: EventLoop) -> BackendChoice {
        let system = loop.system
        let interval = options.pollingInterval
        // Asked of the kernel even when forced: a warning still applies. A directory whose file
        // system cannot be asked (missing) fails in the subscribe that follows, with its own error.
        let kind = try? FileSystemKind.of(directory, system: system)
        let warning =
            kind?.visibility == .virtual
            ? "\(directory) is on \(kind!.name), where the kernel's own changes raise no event and no listing shows them"
            : nil
        let tree = options.recursive && !watchesFile
        switch options.backend {
        case .inotify:
            return BackendChoice(
                kind: .inotify, interval: nil, fileSystem: kind?.name, reason: "inotify was asked for", warning: warning
            )
        case .fanotify where tree:
            return BackendChoice(
                kind: .fanotify, interval: nil, fileSystem: kind?.name, reason: "fanotify was asked for",
                warning: warning)
        case .fanotify:
            return BackendChoice(
                kind: .inotify, interval: nil, fileSystem: kind?.name,
                reason: "fanotify watches trees; one \(watchesFile ? "file" : "directory") is watched through inotify",
                warning: warning)
        case .polling:
            return BackendChoice(
                kind: .polling, interval: interval, fileSystem: kind?.name, reason: "polling was asked for",
                warning: warning)
        case .automatic:
            if let unavailable = loop.inotifyUnavailable {
                return BackendChoice(
                    kind: .polling, interval: interval, fileSystem: kind?.name,
                    reason:
                        "inotify is unavailable (\(DirectoryWatcherError(unavailable, path: directory.description).reason))",
                    warning: warning)
            }
            guard let kind else {
                return BackendChoice(
                    kind: .inotify, interval: nil, fileSystem: nil, reason: "the file system's type is unknown",
                    warning: nil)
            }
            if kind.visibility == .remote {
                return BackendChoice(
                    kind: .polling, interval: interval, fileSystem: kind.name,
                    reason: "\(directory) is on \(kind.name), whose changes made elsewhere inotify does not see",
                    warning: nil)
            }
            if tree && !options.followsSymbolicLinks && kind.visibility != .virtual && loop.inotifyUnavailable == nil {
                // Tried on the loop; a refusal (no capability, no file handles) falls back to
                // inotify with the reason, which the subscribe puts in the session.
                return BackendChoice(
                    kind: .fanotify, interval: nil, fileSystem: kind.name,
                    reason: "\(directory) is on \(kind.name), and the process may mark the whole file system",
                    warning: warning)
            }
            return BackendChoice(
                kind: .inotify, interval: nil, fileSystem: kind.name,
                reason: "\(directory) is on \(kind.name), a local file system"
                    + (tree && options.followsSymbolicLinks ? "; fanotify does not follow symbolic links" : ""),
                warning: warning)
        }
    }

    /// Puts a session on the loop for the start numbered `start`. False when the watcher was
    /// stopped meanwhile.
    private func subscribe(_ session: Session, start: UInt64) throws(DirectoryWatcherError) -> Bool {
        let proceeds = lock.withLock { () -> Bool in
            guard state == .starting(start) else { return false }
            self.session = session
            lastSession = session
            pauseState = .none
            stash = []
            return true
        }
        guard proceeds else {
            session.lease.release()
            return false
        }
        let subscription = session.subscription
        let loop = session.lease.loop
        let subscribed = loop.submitAndWait { loop in
            // What the kernel queued before this watcher joined is not its news: read it first,
            // for the watchers already there. (A directory other watchers watch already is
            // watched by the same kernel watch, whose queued events would otherwise reach this
            // one too: a `created` for an entry that existed before it started.)
            loop.readQueuedEvents()
            return loop.router.subscribeDeferringListing(subscription)
        }
        switch subscribed {
        case .some(.success(let request)):
            if let refusal = subscription.loop.fanotifyRefusal {
                let fallback = BackendChoice(
                    kind: .inotify, interval: nil, fileSystem: session.backend.fileSystem,
                    reason: "fanotify cannot be used: \(refusal)", warning: session.backend.warning)
                lock.withLock { session.backend = fallback }
            }
            if let request {
                // The first listing of a kept directory, read here rather than on the loop: a
                // directory of 100,000 entries takes about half a second, which holds up this
                // caller alone.
                let snapshot = try? Snapshot.read(request.path, system: loop.system)
                _ = loop.submitAndWait { loop in loop.router.install(snapshot, for: request) }
            }
            return true
        case .some(.failure(let failure)):
            throw DirectoryWatcherError(failure, path: givenPath)
        case nil:
            // The lease keeps a shared loop running until a stop on another thread lets go of
            // it (this start is then over); otherwise only a loop made for a test and already
            // shut down by it refuses the task.
            let stoppedMeanwhile = lock.withLock { self.session !== session }
            precondition(stoppedMeanwhile, "a watcher was made on an event loop that had been shut down")
            return false
        }
    }

    /// Ends this watcher's current start; for good when `forGood`. True when it was watching.
    @discardableResult
    private func stop(waiting: Bool, forGood: Bool) -> Bool {
        let (ending, wasWatching) = lock.withLock { () -> (Session?, Bool) in
            let wasWatching: Bool
            switch state {
            case .running, .starting: wasWatching = true
            case .stopped, .invalidated: wasWatching = false
            }
            if state != .invalidated { state = forGood ? .invalidated : .stopped }
            if forGood { retainedDelegate = nil }
            pauseState = .none
            stash = []
            defer { session = nil }
            return (session, wasWatching)
        }
        if let ending { end(ending, waiting: waiting) }
        return wasWatching
    }

    /// Closes a session's gate, takes it off the loop and lets go of the loop; not `waiting`,
    /// it waits neither for a callback in progress nor for a stopped loop's threads to exit.
    private func end(_ session: Session, waiting: Bool) {
        guard session.subscription.gate.close(waiting: waiting) else { return }
        session.lease.loop.execute { [subscription = session.subscription] loop in
            loop.router.unsubscribe(subscription)
        }
        session.lease.release(waiting: waiting)
    }

    /// The current start's subscription (an async sequence acknowledges what its consumer took).
    var currentSubscription: Subscription? { lock.withLock { session?.subscription } }

    /// Returns once the latest start's hold on the loop has been let go of and the loop, if
    /// that stopped it, has stopped. Never on one of the loop's threads.
    func waitUntilLoopReleased() {
        guard let last = lock.withLock({ lastSession }) else { return }
        last.lease.waitUntilReleased()
        last.lease.loop.waitIfStopping()
    }

    // MARK: - Pausing

    /// Pauses the watcher: no callback is made until ``resume()``, which then delivers, as one
    /// batch, what changed meanwhile. Returns true when it paused, false when it was paused
    /// already or is not watching. Safe from any thread, inside callbacks too. It returns once
    /// the loop has taken the pause (as `watchFolder` returns once the watch is in place; inside
    /// a callback on the loop's thread it runs at once), so every change made after it returns
    /// comes with ``resume()``, marked ``DirectoryChange/whilePaused``.
    ///
    /// The watch stays in place while paused, and the loop notes which of the watcher's
    /// directories had events, without collecting them; what the watcher had been told of each
    /// directory is kept. A batch already on its way when this is called is held back, and
    /// comes first in the resuming batch. A change that ends the watch (its directory removed
    /// or moved) is delivered at once, paused or not, with what was held back.
    ///
    /// Barriers still complete while paused, once the loop has routed every event before them:
    /// the changes come with ``resume()``.
    @discardableResult
    public func pause() -> Bool {
        let current = lock.withLock { () -> Session? in
            guard state == .running, pauseState != .paused, let session else { return nil }
            pauseState = .paused
            return session
        }
        guard let current else { return false }
        _ = current.lease.loop.submitAndWait { [subscription = current.subscription] loop in
            // What the kernel holds happened before the pause: routed first, it is held back
            // with the batches on their way, and comes first on resuming.
            loop.readQueuedEvents()
            loop.router.pause(subscription)
        }
        return true
    }

    /// Ends a pause: the next callback is one batch with what changed while paused, each change
    /// marked ``DirectoryChange/whilePaused`` (and before them, any batch held back by
    /// ``pause()``). Returns true when it resumed, false when it was not paused. Safe from any
    /// thread, inside callbacks too; never waits: the batch comes on the watcher's queue.
    ///
    /// Only directories that had events while paused are listed, and compared with what the
    /// watcher had been told of them (names, inodes, sizes and modification times), so resuming
    /// a watcher whose directory did not change costs no system call and delivers nothing. What
    /// a listing can tell is reported: entries created, removed, renamed (followed by inode), and
    /// files written; a change that was undone meanwhile (a file made and removed again) is not,
    /// nor a change of attributes alone. A watcher with ``Recovery/notice`` keeps no snapshot:
    /// it is told one ``DirectoryChange/Kind/overflow`` notice when anything changed, and lists
    /// the directory itself. The resuming batch is handed over at once, settling or not. In a
    /// tree, a directory made while paused is reported with its entries; one removed, as one
    /// removal.
    @discardableResult
    public func resume() -> Bool {
        let current = lock.withLock { () -> Session? in
            guard state == .running, pauseState == .paused, let session else { return nil }
            pauseState = .resuming
            return session
        }
        guard let current else { return false }
        current.lease.loop.execute { [subscription = current.subscription] loop in
            // What the kernel holds is read first: it would otherwise be both listed and reported.
            loop.readQueuedEvents()
            loop.router.resume(subscription)
        }
        return true
    }

    /// The directories this watcher watches now: its own, and for a recursive watcher
    /// (``Options/recursive``) every directory of its tree under its current path, in no
    /// particular order. Empty once the watch has ended (invalidated, or its directory removed).
    /// Safe from any thread; it waits for the event loop to answer.
    public func watchedDirectories() -> [FileSystemPath] {
        guard let session = lock.withLock({ session }) else { return [] }
        let subscription = session.subscription
        return session.lease.loop.submitAndWait { loop in
            if subscription.loop.isEnded { return [] }
            if let polled = subscription.loop.polled, subscription.recursive { return Array(polled.listings.keys) }
            if let tree = subscription.loop.tree {
                // A fanotify tree knows its directories once its listing after readiness is done:
                // what it has not reached yet is listed now.
                loop.router.finishSnapshots(of: subscription)
                return tree.descriptors.compactMap { tree.node($0)?.path }
            }
            return [subscription.root]
        } ?? []
    }

    /// A tree's directories as the watcher holds them, each with its descriptor and the inode it
    /// knows for it (0 when none was read): what the tests check against the disk and the kernel.
    func watchedInodes() -> [(path: FileSystemPath, wd: Int32, inode: UInt64)] {
        guard let session = lock.withLock({ session }) else { return [] }
        let subscription = session.subscription
        return session.lease.loop.submitAndWait { loop in
            guard !subscription.loop.isEnded, let tree = subscription.loop.tree else { return [] }
            loop.router.finishSnapshots(of: subscription)
            return tree.descriptors.compactMap { tree.node($0) }.map { ($0.path, $0.wd, $0.inode) }
        } ?? []
    }

    /// Stops watching, for good: a later ``startMonitoring()`` throws (``stopMonitoring()`` stops
    /// a watcher that is to start again). Idempotent, and safe from any thread, inside any
    /// watcher's callback too.
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

    /// Stops watching; `waiting` false never waits, neither for a callback in progress nor, when
    /// this was the loop's last watcher, for the loop's wake-up in progress to end and its threads
    /// to exit (a Dispatch worker joins them): an async sequence's termination runs while Swift's
    /// runtime holds a lock that a delivery needs, and a cancelled iteration returns at once.
    func invalidate(waiting: Bool) {
        stop(waiting: waiting, forGood: true)
    }

    /// Calls `completion` on the watcher's queue once every change that happened before this call
    /// has been delivered.
    ///
    /// Nothing is written into the watched directory: the loop writes to a private file that its
    /// own inotify instance watches, and the kernel queues that event behind every change already
    /// queued. On a stopped or invalidated watcher, `completion` still runs (behind its last
    /// callback), so nothing waits forever.
    public func barrier(_ completion: @escaping @Sendable () -> Void) {
        guard let session = lock.withLock({ lastSession }) else {
            // Never started: nothing was, or will be, delivered before it.
            DispatchQueue.global().async { CallbackContext.run(completion) }
            return
        }
        let subscription = session.subscription
        let accepted = session.lease.loop.execute { loop in
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
        guard let session = lock.withLock({ session }) else { return }
        _ = session.lease.loop.submitAndWait { loop in loop.router.learnInodesNow() }
    }
}

extension DirectoryWatcher: ChangeReceiver {
    func receive(_ changes: [DirectoryChange], through gate: DeliveryGate) {
        let batch = lock.withLock { () -> [DirectoryChange]? in
            guard pauseState != .none else { return changes }
            // Handed over before the pause took hold on the loop: held for the resuming batch,
            // unless the watch ends here, and nothing is left to wait for.
            stash += changes
            guard changes.contains(where: ChangeTranslation.endsWatch) else { return nil }
            defer { stash = [] }
            return stash
        }
        if let batch { deliver(batch, through: gate) }
    }

    func resumed(with changes: [DirectoryChange], through gate: DeliveryGate) {
        let batch = lock.withLock { () -> [DirectoryChange] in
            stash += changes
            // Paused again since resume() was called: the next resume delivers these too. (Not
            // paused: a pause and resume came quicker than their batches; these are news all
            // the same.)
            guard pauseState != .paused else { return [] }
            pauseState = .none
            defer { stash = [] }
            return stash
        }
        if !batch.isEmpty { deliver(batch, through: gate) }
    }

    private func deliver(_ changes: [DirectoryChange], through gate: DeliveryGate) {
        guard let delegate else { return }
        delegate.directoryWatcher(self, didObserve: changes)
        guard gate.isOpen else { return }
        delegate.directoryDidChange(self)
    }

    func rootWentAway(_ subscription: Subscription) {
        // An earlier start's subscription says nothing of the current one.
        guard lock.withLock({ session?.subscription === subscription }) else { return }
        stop(waiting: true, forGood: false)
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
    /// The duration in seconds, as a person writes it: `1`, `0.25`.
    var secondsText: String {
        let value = Double(nanoseconds) / 1e9
        if value == value.rounded() { return String(Int(value)) }
        var text = String(value)
        while text.hasSuffix("0") { text.removeLast() }
        return text
    }

    /// Whole nanoseconds, clamped to what a `UInt64` holds (negative: zero).
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        let (total, carry) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
        return overflow || carry ? .max : total
    }
}
