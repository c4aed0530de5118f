import Dispatch
import Glibc

/// Starting and stopping: each start is a session (its subscription and its hold on the loop),
/// and a stop, or `invalidate()`, ends it.
extension DirectoryWatcher {
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
            case .invalidated: throw DirectoryWatcherError(code: .invalidated, path: FileSystemPath(givenPath))
            case .starting, .running: return nil
            case .stopped:
                starts += 1
                state = .starting(starts)
                return starts
            }
        }
        guard let start else { return false }
        let session: Session
        let savesFirst: Bool
        do throws(DirectoryWatcherError) {
            session = try makeSession()
            do throws(DirectoryWatcherError) {
                savesFirst = try prepareStart(of: session.subscription)
            } catch {
                session.lease.release()
                throw error
            }
        } catch {
            lock.withLock { if state == .starting(start) { state = .stopped } }
            throw error
        }
        do {
            guard try subscribe(session, start: start) else { return false }
            try finishStart(session, savesFirst: savesFirst)
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
            throw DirectoryWatcherError(error, path: FileSystemPath(givenPath))
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
        if polls && stateStore != nil {
            lease.release()
            throw DirectoryWatcherError(
                code: .invalidOption, path: FileSystemPath(givenPath),
                detail: "a saved state is not kept by a polled watcher yet, and \(backend.reason)")
        }
        if options.gitignore && polls {
            lease.release()
            throw DirectoryWatcherError(
                code: .invalidOption, path: FileSystemPath(givenPath),
                detail: "a polled watcher does not leave out what git ignores yet, and \(backend.reason)")
        }
        if options.gitignore && backend.kind == .fanotify {
            lease.release()
            throw DirectoryWatcherError(
                code: .invalidOption, path: FileSystemPath(givenPath),
                detail: "a tree that leaves out what git ignores is watched through inotify, and fanotify was asked for"
            )
        }
        let settler = options.settling.map {
            Settler(
                quietPeriod: $0.quietPeriod.nanoseconds, maximumWait: $0.maximumWait.nanoseconds,
                reportedMask: options.events.eventMask, listsRemovedContents: $0.listsRemovedContents,
                followsWriters: !polls, waitsForVersionControl: $0.waitsForVersionControl)
        }
        let subscription = Subscription(
            root: root, mask: options.events.eventMask, entry: entry, target: target,
            keepsSnapshot: options.recovery == .exact, recursive: options.recursive && !watchesFile,
            exclusions: Exclusions(options.excludes + stateExclusions(below: root)),
            gitIgnores: options.gitignore && !watchesFile
                ? GitIgnoreState.load(
                    root: root, recursive: options.recursive, system: lease.loop.system
                ) { getenv($0).map { String(cString: $0) } }
                : nil,
            followsLinks: options.followsSymbolicLinks, settler: settler,
            limit: backlog.limit, strictLimit: backlog.isStrict, acknowledgesLater: backlog.acknowledgesLater,
            pollingInterval: polls ? options.pollingInterval.nanoseconds : nil,
            marking: backend.kind != .fanotify ? .no : options.backend == .fanotify ? .required : .preferred)
        subscription.receiver = self
        if options.settling?.comparesContent == true { subscription.loop.contents = ContentMemory() }
        return Session(subscription: subscription, lease: lease, backend: backend)
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
            if let refusal = subscription.loop.markRefusal {
                let fallback = BackendChoice(
                    kind: .inotify, interval: nil, fileSystem: session.backend.fileSystem,
                    reason: "fanotify cannot be used: \(refusal)", warning: session.backend.warning)
                lock.withLock { session.backend = fallback }
            }
            if let request {
                // The first listing of a kept directory, read here rather than on the loop: a
                // directory of 100,000 entries takes about half a second, which holds up this
                // caller alone.
                // (Not for a start from a saved state: that listing is its resume's.)
                let entries =
                    subscription.stateLoad != nil
                    ? nil : try? KnownDirectory.listedEntries(request.path, system: loop.system)
                _ = loop.submitAndWait { loop in loop.router.install(listed: entries, for: request) }
            }
            return true
        case .some(.failure(let failure)):
            throw DirectoryWatcherError(failure, path: FileSystemPath(givenPath))
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
    func stop(waiting: Bool, forGood: Bool) -> Bool {
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
        if let ending {
            if waiting { saveBeforeEnding(ending) }
            end(ending, waiting: waiting)
        }
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
}
