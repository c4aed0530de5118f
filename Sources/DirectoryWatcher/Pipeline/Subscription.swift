import Dispatch
import Synchronization

/// One watcher as the router sees it: what it watches (fixed at creation), where its changes go,
/// and the state the loop keeps for it (``LoopState``, leader only).
///
/// The router collects a watcher's changes during one wake-up into a batch and hands the batch
/// over in one block: to a mailbox that the loop's threads drain (``Target/mailbox(_:)``), or to a
/// serial Dispatch queue (``Target/queue(_:)``). Either way blocks run in the order handed over:
/// kernel order, one at a time.
final class Subscription: @unchecked Sendable {
    /// Where a subscription's blocks run.
    enum Target {
        /// On the loop's threads, in order (see ``Mailbox``).
        case mailbox(Mailbox)
        /// On a serial queue (which may target a caller's queue).
        case queue(DispatchQueue)
    }

    /// The most changes a watcher may have handed over and not yet delivered, unless told
    /// otherwise (``limit``). Past it (a callback blocked while its directory keeps changing),
    /// the router stops handing changes over and, once the backlog has been delivered, hands
    /// over one ``DirectoryChange/Kind/overflow`` notice and what the changes came to, as the
    /// kernel does with its own queue, so a blocked callback cannot make the process grow
    /// without bound.
    static let backlogLimit = 16_384

    /// This watcher's backlog limit (an async sequence's buffer).
    let limit: Int
    /// Whether the limit holds for every batch: an async sequence's buffer is a promise about
    /// its size. A delegate's is about not growing without bound, so a batch is taken whole
    /// whatever its size when nothing else is waiting.
    let strictLimit: Bool
    /// The changes handed over count as delivered when the receiver says they were consumed
    /// (``acknowledge(_:)``), not when its callback returns: an async sequence's buffer is
    /// drained by its consumer, not by the delivery.
    let acknowledgesLater: Bool

    /// The watched directory (for a file watch, the directory that holds the file).
    let root: FileSystemPath
    let mask: UInt32
    /// For a file watch, the entry of ``root`` it follows; nil for a directory watch.
    let entry: WatchedEntry?
    let target: Target
    /// The router keeps what it knows of the directory, to report exactly what an overflow hid.
    let keepsSnapshot: Bool
    /// Watches every directory below ``root`` too (``LoopState/tree``).
    let recursive: Bool
    /// Entries whose changes are never reported, and directories of the tree never watched.
    let exclusions: Exclusions?
    /// git's rules, when what git ignores is left out (``GitIgnoreState``).
    let gitIgnores: GitIgnoreState?
    /// A tree follows symbolic links to directories.
    let followsLinks: Bool
    /// Polled rather than watched through inotify: the longest wait between two polls, in
    /// nanoseconds (see ``PollSchedule``); nil for inotify.
    let pollingInterval: UInt64?
    /// Whether a recursive watcher is to use fanotify (see ``Router/subscribeMarked(_:)``).
    let marking: MarkUse
    let gate = DeliveryGate()
    /// What the watcher was told before it last stopped, when it starts from a saved state (or
    /// why it starts from none): set before the subscription reaches the loop, taken by the loop.
    var stateLoad: StateLoad?
    /// Receives the batches. Set once, before the subscription reaches the loop.
    weak var receiver: (any ChangeReceiver)?
    /// Changes handed over and not yet delivered (any thread).
    private let backlog = Atomic<Int>(0)
    /// Set when the backlog overflowed and the watcher is owed a catch-up: the delivery that
    /// empties the backlog then calls ``onBacklogDrained``.
    private let awaitsDrain = Atomic<Bool>(false)
    /// Changes handed over and not yet delivered (or, for an async sequence, not yet consumed).
    var undelivered: Int { backlog.load(ordering: .acquiring) }
    /// Asks to be told (``onBacklogDrained``) once the backlog has been delivered: a save of the
    /// watcher's state waits for it. False when it is empty already (nothing will tell).
    func awaitDrain() -> Bool {
        awaitsDrain.store(true, ordering: .sequentiallyConsistent)
        guard backlog.load(ordering: .sequentiallyConsistent) == 0 else { return true }
        return !awaitsDrain.exchange(false, ordering: .acquiringAndReleasing)
    }
    /// Tells the loop that the backlog of a watcher owed a catch-up (or a save) has been delivered. Set once,
    /// when the subscription reaches the loop (before any delivery). Passed the subscription, so
    /// that it need not hold it: a weak reference to it would send every retain and release of
    /// a subscription, several a batch, through the runtime's slow path (its side table).
    var onBacklogDrained: (@Sendable (Subscription) -> Void)?

    /// What the router keeps for a subscription. Loop leader only: the router checks that it is
    /// on the leading thread before touching it.
    struct LoopState {
        /// The kernel watches this subscription is in: its directory's, or, for a recursive
        /// one, every directory of ``tree``.
        var descriptors: [Int32] {
            get { tree?.descriptors ?? ownDescriptors }
            set { ownDescriptors = newValue }
        }
        var ownDescriptors: [Int32] = []
        /// A recursive subscription's directories.
        var tree: WatchedTree?
        var pending: [DirectoryChange] = []
        /// No more changes are collected: the watcher left, or its root went away.
        var isEnded = false
        /// The pending batch ends the watch (the root was removed or moved).
        var endsWithBatch = false
        /// An overflow was handed over for a backlog past ``Subscription/backlogLimit``, and no
        /// more changes are until the backlog has been delivered.
        var isOverflowing = false
        /// For a watcher that keeps snapshots: what it was owed when its backlog overflowed, and
        /// what it was told of each of its directories then. Its changes are dropped until the
        /// router delivers the catch-up (see ``Router``).
        var catchUp: CatchUp?
        /// The next batch is a catch-up: it is handed over whatever the backlog.
        var takesAnyBatch = false
        /// For a settling watcher: its changes since its last batch, and when they are due.
        var settler: Settler?
        /// For a settling watcher that compares content: the digests of the files it saw written.
        var contents: ContentMemory?
        /// While the watcher is paused: what it had been told, and which directories changed.
        var pause: Pause?
        /// A polled watcher's listings and schedule.
        var polled: Polled?
        /// For a tree watched through fanotify: the id of its file system, whose mark it uses.
        var markedFileSystem: [UInt8]?
        /// For a tree: whether it follows the mount table (``Router/followMounts(_:from:)``), and
        /// the id of the mount its root was on when it started (nil when the table could not be
        /// read).
        var followsMounts = false
        var rootMount: Int?
        /// Why fanotify could not be used, when it was preferred (set before the subscribe
        /// task returns, so the subscribing thread reads it after).
        var markRefusal: String?
    }

    /// Whether a recursive watcher uses marked.
    enum MarkUse: Sendable {
        /// inotify (or polling).
        case no
        /// fanotify where it can be used, inotify otherwise (``LoopState/markRefusal`` says why).
        case preferred
        /// fanotify, or the subscribe fails.
        case required
    }

    /// What a polled watcher keeps: the last listing of each of its directories (every
    /// directory of its tree, for a recursive one), and when it polls next.
    struct Polled {
        var listings: [FileSystemPath: Snapshot]
        var schedule: PollSchedule
    }

    /// A paused watcher (``Router/pause(_:)``): its changes are not collected, and on resuming it
    /// is told what they came to by listing the directories that changed.
    struct Pause {
        /// What the watcher had been told of each of its kept directories when it paused.
        var baseline: [Int32: NameTable<KnownDirectory.Known>]
        /// The directories that had events since (only they can have changed).
        var touched: Set<Int32> = []
        /// Events were lost while paused (the kernel queue overflowed): every directory is
        /// listed on resuming.
        var lostEvents = false
        /// Changes the watcher was owed when it paused (a catch-up's), handed over first.
        var owed: [DirectoryChange] = []
        /// Resuming: the listings are due once the kernel queue is drained.
        var isDue = false
        /// What the listings found, in order, for the resuming batch.
        var found: [DirectoryChange] = []
        /// The watcher's own directory could not be listed on resuming.
        var failure: SyscallError?
        /// The pause stands for the time nothing watched: the watcher started from a saved
        /// state (``Router/startFromSavedState(_:_:)``), and what the listings find is marked
        /// ``DirectoryChange/whileStopped``.
        var standsForStop = false
        /// The start from a saved state is refused (the state could not be used): nothing the
        /// listings find is reported.
        var reportsNothing = false
        /// For such a tree: what was known of each removed entry among ``found``, and the status
        /// of each created one, by index (a move between two directories is both).
        var foundMoves: [Int: MoveSide] = [:]

        enum MoveSide {
            case removed(KnownDirectory.Known)
            case created(Snapshot.Entry)
        }
    }

    /// What a watcher whose backlog overflowed is owed.
    struct CatchUp {
        /// The changes of the overflowing batch that did not fit, in order.
        var remainder: [DirectoryChange]
        /// What the watcher's directories were known to be when they were dropped, by descriptor.
        var baseline: [Int32: NameTable<KnownDirectory.Known>]
        /// The backlog has been delivered: the catch-up is due once the kernel queue is drained.
        var isDue = false
        /// How many changes were dropped meanwhile (the listing reports what they came to).
        var dropped = 0
    }

    /// Leader only (see ``LoopState``). The router checks that it runs on the leader, so the
    /// runtime's exclusivity check on every change collected would only cost time.
    @exclusivity(unchecked) var loop = LoopState()

    init(
        root: FileSystemPath, mask: UInt32, entry: WatchedEntry? = nil, target: Target, keepsSnapshot: Bool = false,
        recursive: Bool = false, exclusions: Exclusions? = nil, gitIgnores: GitIgnoreState? = nil,
        followsLinks: Bool = false, settler: Settler? = nil,
        limit: Int = Subscription.backlogLimit, strictLimit: Bool = false, acknowledgesLater: Bool = false,
        pollingInterval: UInt64? = nil, marking: MarkUse = .no
    ) {
        self.marking = recursive ? marking : .no
        self.pollingInterval = pollingInterval
        self.limit = limit
        self.strictLimit = strictLimit
        self.acknowledgesLater = acknowledgesLater
        self.exclusions = exclusions
        self.gitIgnores = gitIgnores
        // A settling watcher follows entries and writers whatever it reports.
        self.mask = settler == nil ? mask : mask | Settler.followedMask
        self.loop.settler = settler
        self.followsLinks = followsLinks
        self.root = root
        self.entry = entry
        self.target = target
        // A tree's directories are known by their names in any case: that is what keeps a new
        // directory's entries from being reported twice, and it makes recovery exact.
        self.keepsSnapshot = keepsSnapshot || recursive
        self.recursive = recursive
    }

    /// The mailbox, for a subscription delivered on the loop's threads.
    var mailbox: Mailbox? {
        if case .mailbox(let mailbox) = target { return mailbox }
        return nil
    }

    /// Leader: adds a change to the batch, folding repeated writes (or reads) of one file into
    /// one. Returns true when the batch was empty before.
    func collect(_ change: consuming DirectoryChange) -> Bool {
        if change.kind == .modified || change.kind == .accessed, let last = loop.pending.last, last == change {
            return false
        }
        loop.pending.append(change)
        return loop.pending.count == 1
    }

    /// Leader: hands the pending batch over. Returns the mailbox when it must now be drained.
    func flush() -> Mailbox? {
        var batch: [DirectoryChange] = []
        swap(&batch, &loop.pending)
        let ends = loop.endsWithBatch
        let undelivered = backlog.load(ordering: .acquiring)
        let room = limit - undelivered
        // A watcher that has taken everything so far takes any batch, however large (a rescan's),
        // unless its limit is strict.
        if (undelivered == 0 && !strictLimit) || batch.count <= room || loop.takesAnyBatch {
            loop.isOverflowing = false
            loop.takesAnyBatch = false
        } else if !ends {
            // Blocked for long: what fits, and nothing more until the backlog has been delivered.
            if loop.isOverflowing { return nil }
            loop.isOverflowing = true
            let fits = max(room, 0)
            if keepsSnapshot {
                // The router owes the rest, and the notice, once the backlog has drained: it
                // then knows how many changes were dropped meanwhile.
                loop.catchUp = CatchUp(remainder: Array(batch[fits...]), baseline: [:])
                awaitsDrain.store(true, ordering: .relaxed)
                batch.removeLast(batch.count - fits)
            } else {
                // Without a snapshot nothing is owed: one notice stands for everything until the
                // backlog has been delivered.
                batch.removeLast(batch.count - fits)
                batch.append(DirectoryChange(kind: .overflow, path: root, isDirectory: true))
            }
            if batch.isEmpty {
                // Nothing handed over to drain it later: the backlog may have drained already.
                if backlog.load(ordering: .acquiring) == 0,
                    awaitsDrain.exchange(false, ordering: .acquiringAndReleasing)
                {
                    onBacklogDrained?(self)
                }
                return nil
            }
        }
        backlog.add(batch.count, ordering: .acquiringAndReleasing)
        switch target {
        case .mailbox(let mailbox):
            return mailbox.append(batch: batch, of: self, ends: ends, refilling: &loop.pending) ? mailbox : nil
        case .queue(let queue):
            queue.async { [batch] in CallbackContext.run { self.deliverHandedOver(batch, ends: ends) } }
            return nil
        }
    }

    /// Where the callbacks run: a batch ``flush()`` handed over.
    func deliverHandedOver(_ batch: [DirectoryChange], ends: Bool) {
        deliver(batch, ends: ends)
        if !acknowledgesLater { acknowledge(batch.count) }
    }

    /// `count` changes handed over have been delivered (consumed, for an async sequence). When
    /// that empties an overflowed backlog, the router is told the watcher's catch-up is due.
    func acknowledge(_ count: Int) {
        // Acquiring-releasing: the flag was set before this count was added.
        if backlog.subtract(count, ordering: .acquiringAndReleasing).newValue == 0,
            awaitsDrain.exchange(false, ordering: .acquiringAndReleasing)
        {
            onBacklogDrained?(self)
        }
    }

    /// Runs `block` where this subscription's callbacks run, after those handed over before it.
    /// Returns the mailbox when it must now be drained (the caller schedules it).
    func run(_ block: @escaping @Sendable () -> Void) -> Mailbox? {
        switch target {
        case .mailbox(let mailbox):
            return mailbox.append(block) ? mailbox : nil
        case .queue(let queue):
            queue.async { CallbackContext.run(block) }
            return nil
        }
    }

    /// Where the callbacks run.
    private func deliver(_ batch: [DirectoryChange], ends: Bool) {
        if gate.enter() {
            receiver?.receive(batch, through: gate)
            gate.leave()
        }
        if ends { receiver?.rootWentAway(self) }
    }

    /// Leader: hands over the batch that ends a pause (what changed while paused, possibly
    /// nothing), behind everything handed over before it. Returns the mailbox when it must now
    /// be drained.
    func handOverResumed(_ changes: [DirectoryChange]) -> Mailbox? {
        let batch = receiver?.resuming(changes) ?? changes
        // Undelivered until its callback has run, as a flushed batch is, and one more for the
        // callback itself: a save waits for it even when it holds nothing (the pause ends there).
        let count = batch.count + 1
        backlog.add(count, ordering: .acquiringAndReleasing)
        return run {
            if self.gate.enter() {
                self.receiver?.resumed(with: batch, through: self.gate)
                self.gate.leave()
            }
            // A consumer that acknowledges what it takes acknowledges the changes.
            self.acknowledge(self.acknowledgesLater ? 1 : count)
        }
    }
}

/// What a subscription delivers to: the public watcher types.
protocol ChangeReceiver: AnyObject, Sendable {
    /// Called on the delivery queue inside the gate; checks `gate.isOpen` between callbacks.
    func receive(_ changes: [DirectoryChange], through gate: DeliveryGate)
    /// Called on the loop as the batch that ends a pause is handed over: the batch to deliver
    /// (a start from a saved state adds what became of the paths its journal holds).
    func resuming(_ changes: [DirectoryChange]) -> [DirectoryChange]
    /// Called on the delivery queue, inside the gate, with what changed while the watcher was
    /// paused (as ``resuming(_:)`` returned it): the pause is over from here on.
    func resumed(with changes: [DirectoryChange], through gate: DeliveryGate)
    /// Called on the delivery queue after the batch that removed or moved the root.
    func rootWentAway(_ subscription: Subscription)
}

extension ChangeReceiver {
    func resuming(_ changes: [DirectoryChange]) -> [DirectoryChange] { changes }
}
