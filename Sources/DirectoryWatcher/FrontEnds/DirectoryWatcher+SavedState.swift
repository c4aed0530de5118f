import Dispatch
import Glibc

/// Saved states (``DirectoryWatcher/Options/savedState``): where a start begins, and each save.
extension DirectoryWatcher {
    /// Saves the watcher's state now: every change delivered so far counts as handled, and is not
    /// reported again by a watcher started from the state. Call it once you have handled what
    /// you were given (a consumer that handles each batch inside its callback may call it there).
    ///
    /// Outside callbacks it returns once the state is on disk: after every change the loop has
    /// read for this watcher has been delivered, it is taken, written to a new file beside the
    /// old, synced and renamed over it. Inside a callback it never waits (the deliveries it would
    /// wait for are behind this callback): the state is taken once this callback and those
    /// before it have returned, and a failure to write it is delivered as a
    /// ``DirectoryChange/Kind/failed`` change naming the file.
    ///
    /// - Throws: ``DirectoryWatcherError/Code/savedStateNotWritten`` naming the file and the
    ///   cause, the file as it was left intact; ``DirectoryWatcherError/Code/invalidOption`` when
    ///   the watcher has no ``Options/savedState``; ``DirectoryWatcherError/Code/invalidated``
    ///   when it is not watching.
    public func saveState() throws(DirectoryWatcherError) {
        guard let store = stateStore else {
            throw DirectoryWatcherError(
                code: .invalidOption, path: path, detail: "the watcher has no saved state (Options.savedState)")
        }
        guard let session = lock.withLock({ session }) else {
            throw DirectoryWatcherError(
                code: .invalidated, path: path, detail: "a watcher that is not watching has no state to save")
        }
        if CallbackContext.isActive {
            saveLater(session, store)
            return
        }
        try save(session, store)
    }

    /// The state file given, resolved; nil without one. Checks the options a state needs.
    static func stateStore(
        for options: Options, given path: String, system: System
    ) throws(DirectoryWatcherError) -> StateStore? {
        guard let state = options.savedState else { return nil }
        guard !state.path.isEmpty else {
            throw DirectoryWatcherError(
                code: .invalidOption, path: FileSystemPath(path), detail: "the saved state's path is empty")
        }
        guard options.recovery == .exact || options.recursive else {
            throw DirectoryWatcherError(
                code: .invalidOption, path: FileSystemPath(path),
                detail: "a saved state needs Recovery.exact: with Recovery.notice nothing is kept to save")
        }
        guard options.backend != .polling else {
            throw DirectoryWatcherError(
                code: .invalidOption, path: FileSystemPath(path),
                detail: "a saved state is not kept by a polled watcher yet; use Backend.inotify or .fanotify")
        }
        if let interval = state.interval, interval <= .zero {
            throw DirectoryWatcherError(
                code: .invalidOption, path: FileSystemPath(path),
                detail: "the saved state's interval must be more than zero, not \(interval)")
        }
        let absolute = try PathResolution(system: system).absolute(state.path)
        return StateStore(path: absolute, startsFreshWhenUnusable: state.whenUnusable == .startFresh, system: system)
    }

    /// Globs that leave the state file, and the temporary file of each save, out of what a
    /// watcher of `root` reports, when the file is inside it.
    func stateExclusions(below root: FileSystemPath) -> [String] {
        guard let store = stateStore else { return [] }
        let file = store.path.bytes
        var prefix = root.bytes
        if prefix.last != UInt8(ascii: "/") { prefix.append(UInt8(ascii: "/")) }
        guard file.count > prefix.count, file.starts(with: prefix),
            let relative = String(validating: file[prefix.count...], as: UTF8.self)
        else { return [] }
        // Escaped, so that a name with glob characters matches only itself.
        var escaped = ""
        for character in relative {
            if "*?[\\".contains(character) { escaped.append("\\") }
            escaped.append(character)
        }
        return [escaped, escaped + ".tmp-*", escaped + ".journal", escaped + ".journal.tmp-*"]
    }

    /// Reads the state a start begins from, checks it (header, version, checksum, root), and
    /// marks the subscription with it: its directories are decoded on a worker while the watch
    /// starts. True when there is none (the first state is then saved once the watch is in place).
    func prepareStart(of subscription: Subscription) throws(DirectoryWatcherError) -> Bool {
        guard let store = stateStore else { return false }
        switch try store.load(root: subscription.root) {
        case .fresh:
            _ = store.openJournal(keeping: false)
            return true
        case .saved(let checked):
            subscription.stateLoad = StateLoad(waitingForAsks: store.decodingWaitsForAsks) { store.decode(checked) }
            let journaled = store.openJournal(keeping: true)
            lock.withLock { restoreJournal = journaled }
        case .replaced(let notice):
            _ = store.openJournal(keeping: false)
            subscription.stateLoad = StateLoad(.fresh(notice: store.notice(notice)))
        }
        return false
    }

    /// Once the watch is in place: reports what changed since the state (then saves the state
    /// that follows, once that report has been delivered), or saves the first state.
    ///
    /// - Throws: ``DirectoryWatcherError/Code/savedStateUnusable`` when the state's directories
    ///   do not parse and the caller chose ``Options/SavedState/WhenUnusable/refuse``.
    func finishStart(_ session: Session, savesFirst: Bool) throws(DirectoryWatcherError) {
        guard let store = stateStore else { return }
        let subscription = session.subscription
        if let load = subscription.stateLoad {
            _ = session.lease.loop.submitAndWait { loop in
                loop.readQueuedEvents()
                loop.router.resumeFromSavedState(subscription, queueDrained: loop.isDrained)
            }
            if let refusal = load.refusal() { throw refusal }
            saveLater(session, store)
        } else if savesFirst {
            try save(session, store)
        }
        if let interval = options.savedState?.interval { startSaving(session, store, every: interval) }
    }

    /// Takes the state once everything read for the watcher has been delivered, and writes it.
    private func save(_ session: Session, _ store: StateStore) throws(DirectoryWatcherError) {
        let taken = LockedSlot<(SavedDirectories, (number: UInt64, journaled: Int))>()
        let done = DispatchSemaphore(value: 0)
        let accepted = session.lease.loop.execute { [subscription = session.subscription] loop in
            // What the kernel holds is this watcher's before the save: routed, delivered first.
            let readBefore = System.coarseWallClockNow()
            loop.readQueuedEvents()
            loop.router.requestSave(of: subscription) { saved in
                if var saved {
                    saved.readBefore = readBefore
                    taken.set((saved, store.numberNext()))
                }
                done.signal()
            }
        }
        if accepted { done.wait() }
        guard let (saved, numbered) = taken.get() else {
            throw DirectoryWatcherError(
                code: .savedStateNotWritten, path: store.path, detail: "the watch ended before its state could be taken"
            )
        }
        try store.write(saved, number: numbered.number, journaled: numbered.journaled)
    }

    /// ``save(_:_:)`` without waiting: the state is written on a Dispatch worker, and a failure
    /// is delivered to the watcher as a `failed` change.
    func saveLater(_ session: Session, _ store: StateStore) {
        let subscription = session.subscription
        session.lease.loop.execute { loop in
            let readBefore = System.coarseWallClockNow()
            loop.readQueuedEvents()
            loop.router.requestSave(of: subscription) { saved in
                guard var state = saved else { return }
                state.readBefore = readBefore
                let taken = state
                let numbered = store.numberNext()
                DispatchQueue.global(qos: .utility).async {
                    do throws(DirectoryWatcherError) {
                        try store.write(taken, number: numbered.number, journaled: numbered.journaled)
                    } catch {
                        let failure = DirectoryChange(kind: .failed, path: store.path, isDirectory: false, error: error)
                        loop.execute { loop in loop.router.collect(failure, for: subscription) }
                    }
                }
            }
        }
    }

    /// Saves every `interval` while the session lasts.
    private func startSaving(_ session: Session, _ store: StateStore, every interval: Duration) {
        let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        let nanoseconds = Int(clamping: interval.nanoseconds)
        timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds))
        timer.setEventHandler { [weak self, weak session] in
            guard let self, let session else { return }
            self.saveLater(session, store)
        }
        lock.withLock { session.stateTimer = timer }
        timer.resume()
    }

    /// The first batch of a start from a state, with what became of each path the journal holds
    /// (delivered after the last save) that the batch does not mention: created where an entry
    /// is there now, removed where none is. So a change delivered after the last save and undone
    /// before this start is undone in the consumer's view too. On the loop, as the batch is
    /// handed over: counted with it, a save waits until all of it has been delivered.
    func withJournaledPaths(_ changes: [DirectoryChange]) -> [DirectoryChange] {
        // A refused start reports nothing, not even what the journal holds.
        if lock.withLock({ session?.subscription.stateLoad?.refusalIfDone }) != nil {
            lock.withLock { restoreJournal = nil }
            return []
        }
        guard
            let journaled = lock.withLock({ () -> [StateStore.JournalEntry]? in
                defer { restoreJournal = nil }
                return restoreJournal
            }), !journaled.isEmpty
        else { return changes }
        var mentioned = Set<FileSystemPath>()
        for change in changes {
            mentioned.insert(change.path)
            if let old = change.oldPath { mentioned.insert(old) }
        }
        var extra: [DirectoryChange] = []
        for entry in journaled where mentioned.insert(entry.path).inserted {
            var status = stat()
            if entry.path.withCString({ lstat($0, &status) }) == 0 {
                guard options.events.contains(.created) else { continue }
                extra.append(
                    DirectoryChange(
                        kind: .created, path: entry.path, isDirectory: status.st_mode & S_IFMT == S_IFDIR,
                        whileStopped: true))
            } else if errno == ENOENT || errno == ENOTDIR {
                guard options.events.contains(.removed) else { continue }
                extra.append(
                    DirectoryChange(
                        kind: .removed, path: entry.path, isDirectory: entry.isDirectory, whileStopped: true))
            }
        }
        return changes + extra
    }

    /// Before a session ends: its last state, unless the stop comes from inside a callback (which
    /// cannot wait for the deliveries before it): the last state saved then stands.
    func saveBeforeEnding(_ session: Session) {
        lock.withLock {
            session.stateTimer?.cancel()
            session.stateTimer = nil
        }
        guard let store = stateStore, !CallbackContext.isActive else { return }
        try? save(session, store)
    }
}

/// A value handed from one thread to another.
final class LockedSlot<Value>: @unchecked Sendable {
    private let lock = Lock()
    private var value: Value?

    func set(_ newValue: Value) { lock.withLock { value = newValue } }
    func get() -> Value? { lock.withLock { value } }
}
