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
    let givenPath: String
    /// The state file, with ``Options/savedState``.
    let stateStore: StateStore?
    /// Watches one file by name (`watchFile`) rather than a directory.
    let watchesFile: Bool
    /// Where callbacks run, the same for every start, so that a callback of an earlier start
    /// and one of the next never overlap.
    let target: Subscription.Target
    /// A loop the caller owns (tests); nil for the process's shared loop.
    let dedicatedLoop: EventLoop?
    /// An async sequence's buffer (``Subscription/limit``), or the default backlog.
    let backlog: Backlog

    /// A backlog policy: the limit, and whether changes count as delivered once consumed.
    struct Backlog {
        var limit = Subscription.backlogLimit
        var isStrict = false
        var acknowledgesLater = false
    }

    /// One start's hold on the loop and its subscription.
    final class Session: @unchecked Sendable {
        let subscription: Subscription
        let lease: LoopLease
        /// Settled once the subscribe returns (a tree that preferred fanotify and could not have
        /// it says inotify, and why); under the watcher's lock.
        var backend: BackendChoice
        /// Saves the state every ``SavedState/interval``; under the watcher's lock.
        var stateTimer: DispatchSourceTimer?

        init(subscription: Subscription, lease: LoopLease, backend: BackendChoice) {
            self.subscription = subscription
            self.lease = lease
            self.backend = backend
        }
    }

    enum State: Equatable {
        case stopped
        /// The ``startMonitoring()`` call with this number is under way on some thread. (A stop
        /// and another start may come meanwhile: the number tells whose start it is.)
        case starting(UInt64)
        case running
        /// ``invalidate()``: for good.
        case invalidated
    }

    enum PauseState {
        case none
        case paused
        /// ``resume()`` was called; the batch that ends the pause is on its way.
        case resuming
    }

    let lock = Lock()
    // Under `lock`. (Those each batch reads skip the runtime's exclusivity checks, which would
    // only cost time: the lock already keeps their accesses apart.)
    @exclusivity(unchecked) private weak var weakDelegate: (any DirectoryWatcherDelegate)?
    /// For the closure form, which has no owner to keep its delegate alive: held strongly, and
    /// then the weak reference is nil. (A weakly referenced object's every retain and release
    /// goes through the runtime's slow path, and a weak read costs more than a strong one: a
    /// batch reads the delegate once.)
    @exclusivity(unchecked) var retainedDelegate: (any DirectoryWatcherDelegate)?
    var state = State.stopped
    /// The number of the latest ``startMonitoring()`` call that began starting.
    var starts: UInt64 = 0
    /// The current start's session (set while starting, too); nil while stopped.
    var session: Session?
    /// The latest session, stopped or not: barriers of a stopped watcher complete behind its
    /// last callbacks.
    var lastSession: Session?
    @exclusivity(unchecked) var pauseState = PauseState.none
    /// Batches that reached a paused watcher (handed over before the pause took hold on the
    /// loop): delivered first when it resumes.
    @exclusivity(unchecked) var stash: [DirectoryChange] = []
    /// What the test kit watches of the deliveries (``observeDeliveries(_:)``), by number.
    @exclusivity(unchecked) var observers: [Int: @Sendable ([DirectoryChange]) -> Void] = [:]
    /// A start from a saved state: the paths its journal held, for the first batch.
    var restoreJournal: [StateStore.JournalEntry]?
    var nextObserver = 0

    /// The delegate, held weakly (a closure form's, which the watcher made for its handler,
    /// strongly: setting another lets it go). Setting it takes effect from the next batch.
    public var delegate: (any DirectoryWatcherDelegate)? {
        get { lock.withLock { retainedDelegate ?? weakDelegate } }
        set {
            lock.withLock {
                weakDelegate = newValue
                retainedDelegate = nil
            }
        }
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
        guard !path.isEmpty else { throw DirectoryWatcherError(code: .emptyPath, path: FileSystemPath(path)) }
        if let problem = options.settling?.problem {
            throw DirectoryWatcherError(code: .invalidOption, path: FileSystemPath(path), detail: problem)
        }
        if options.pollingInterval <= .zero {
            throw DirectoryWatcherError(
                code: .invalidOption, path: FileSystemPath(path),
                detail: "the polling interval must be more than zero, not \(options.pollingInterval)")
        }
        if options.delivery == .eventLoopThread, queue != nil {
            throw DirectoryWatcherError(
                code: .invalidOption, path: FileSystemPath(path),
                detail: "a queue and Delivery.eventLoopThread exclude each other: pass no queue, or another delivery")
        }
        let absolute = try PathResolution(system: loop?.system ?? System()).absolute(path)
        stateStore = try Self.stateStore(for: options, given: path, system: loop?.system ?? System())
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
            preconditionFailure("refused above")
        }
        self.path = absolute
        self.givenPath = path
        self.options = options
        self.watchesFile = watchesFile
        self.dedicatedLoop = loop
        self.backlog = backlog
    }

    /// The closure forms have no owner to keep their delegate alive: the watcher does.
    func retain(_ delegate: any DirectoryWatcherDelegate) {
        lock.withLock {
            weakDelegate = nil
            retainedDelegate = delegate
        }
    }

    deinit {
        invalidate()
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
        var audience: Audience?
        let batch = lock.withLock { () -> [DirectoryChange]? in
            guard pauseState != .none else {
                audience = self.audience
                return changes
            }
            // Handed over before the pause took hold on the loop: held for the resuming batch,
            // unless the watch ends here, and nothing is left to wait for.
            stash += changes
            guard changes.contains(where: ChangeTranslation.endsWatch) else { return nil }
            defer { stash = [] }
            audience = self.audience
            return stash
        }
        if let batch, let audience { deliver(batch, to: audience, through: gate) }
    }

    func resuming(_ changes: [DirectoryChange]) -> [DirectoryChange] {
        stateStore == nil ? changes : withJournaledPaths(changes)
    }

    func resumed(with changes: [DirectoryChange], through gate: DeliveryGate) {
        var audience: Audience?
        let batch = lock.withLock { () -> [DirectoryChange] in
            stash += changes
            // Paused again since resume() was called: the next resume delivers these too. (Not
            // paused: a pause and resume came quicker than their batches; these are news all
            // the same.)
            guard pauseState != .paused else { return [] }
            pauseState = .none
            defer { stash = [] }
            audience = self.audience
            return stash
        }
        if !batch.isEmpty, let audience { deliver(batch, to: audience, through: gate) }
    }

    /// Who hears of a batch: the test kit's observers, then the delegate. Read under `lock` with
    /// the batch's pause check, so that a batch takes the lock once.
    private struct Audience {
        var observers: [@Sendable ([DirectoryChange]) -> Void]?
        var delegate: (any DirectoryWatcherDelegate)?
    }

    /// Under `lock`.
    private var audience: Audience {
        Audience(
            observers: observers.isEmpty ? nil : Array(observers.values), delegate: retainedDelegate ?? weakDelegate)
    }

    private func deliver(_ changes: [DirectoryChange], to audience: Audience, through gate: DeliveryGate) {
        // Before the delegate sees them: killed while it handles them, the next start reports
        // what became of them.
        stateStore?.journal(changes)
        // Before the delegate: a barrier behind this batch finds it recorded.
        if let observers = audience.observers { for observer in observers { observer(changes) } }
        guard let delegate = audience.delegate else { return }
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
final class ClosureDelegate: DirectoryWatcherDelegate, Sendable {
    let handler: @Sendable ([DirectoryChange]) -> Void

    init(_ handler: @escaping @Sendable ([DirectoryChange]) -> Void) {
        self.handler = handler
    }

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
