import Dispatch

/// One watcher as the event loop sees it: what it watches, and where its changes go.
///
/// The loop thread collects a watcher's changes during one wake-up into ``pending`` and hands the
/// batch to ``queue`` in one block, so a slow delegate delays only its own queue, never the loop's
/// reading of the kernel queue. Blocks run in the order the loop enqueued them: kernel order.
/// A subscription without a queue (``DirectoryWatcher/Delivery/eventLoopThread``) is called on the
/// loop thread itself: no hand-off, at the price of the loop waiting for its callbacks.
final class Subscription: @unchecked Sendable {
    /// The watched directory (for a file watch, the directory that holds the file).
    let root: FileSystemPath
    let mask: UInt32
    /// For a file watch, the entry of ``root`` it follows; nil for a directory watch.
    let entry: WatchedEntry?
    /// Serial; targets the caller's queue when one was given. Nil: callbacks run on the loop thread.
    let queue: DispatchQueue?
    let gate = DeliveryGate()
    /// Receives the batches. Set once, before the subscription reaches the loop.
    weak var receiver: (any ChangeReceiver)?

    // Loop thread only.
    var descriptors: [Int32] = []
    var pending: [DirectoryChange] = []
    /// No more changes are collected: the watcher left, or its root went away.
    var isEnded = false
    /// The pending batch ends the watch (the root was removed or moved).
    var endsWithBatch = false

    init(root: FileSystemPath, mask: UInt32, entry: WatchedEntry? = nil, queue: DispatchQueue?) {
        self.root = root
        self.mask = mask
        self.entry = entry
        self.queue = queue
    }

    /// Loop thread: adds a change to the batch, folding repeated writes (or reads) of one file
    /// into one. Returns true when the batch was empty before.
    func collect(_ change: DirectoryChange) -> Bool {
        if change.kind == .modified || change.kind == .accessed, let last = pending.last, last == change {
            return false
        }
        pending.append(change)
        return pending.count == 1
    }

    /// Loop thread: hands the pending batch to the delivery queue (or delivers it now).
    func flush() {
        let batch = pending
        let ends = endsWithBatch
        pending = []
        run { self.deliver(batch, ends: ends) }
    }

    /// Runs `block` where this subscription's callbacks run, after those handed over before it,
    /// inside the ``CallbackContext`` (a loop thread is inside it for its whole life).
    func run(_ block: @escaping @Sendable () -> Void) {
        if let queue {
            queue.async { CallbackContext.run(block) }
        } else {
            block()
        }
    }

    /// Delivery queue (or the loop thread).
    private func deliver(_ batch: [DirectoryChange], ends: Bool) {
        if gate.enter() {
            receiver?.receive(batch, through: gate)
            gate.leave()
        }
        if ends { receiver?.rootWentAway() }
    }
}

/// What a subscription delivers to: the public watcher types.
protocol ChangeReceiver: AnyObject, Sendable {
    /// Called on the delivery queue inside the gate; checks `gate.isOpen` between callbacks.
    func receive(_ changes: [DirectoryChange], through gate: DeliveryGate)
    /// Called on the delivery queue after the batch that removed or moved the root.
    func rootWentAway()
}
