/// One watcher's deliveries waiting to run on the loop's threads, in order, one at a time.
///
/// The router appends items (a batch, a barrier completion) as it routes. A mailbox is either
/// idle or scheduled: the append that finds it idle schedules it, and the caller then owes it one
/// drain on some thread; the drain runs items until it finds the mailbox empty and marks it idle
/// again. So at most one thread drains a mailbox at a time, and items run in the order appended:
/// a watcher's callbacks never overlap and come in kernel order, whichever thread runs them.
final class Mailbox: @unchecked Sendable {
    typealias Block = @Sendable () -> Void

    /// A delivery: a batch as data (the common case: a wake-up's changes, with no closure to
    /// allocate and free for them), or any other block (a barrier's completion, a resume).
    enum Item: @unchecked Sendable {
        case block(Block)
        case batch(Subscription, [DirectoryChange], ends: Bool)
        /// What ``take(_:in:)`` leaves behind.
        case taken

        /// Runs the item; for a batch, returns its array emptied, for its storage to hold a later
        /// batch (nil when it is too large to keep).
        consuming func run() -> [DirectoryChange]? {
            switch consume self {
            case .block(let block):
                block()
                return nil
            case .batch(let subscription, var changes, let ends):
                subscription.deliverHandedOver(changes, ends: ends)
                // A rescan's batch of many thousand changes is not kept for ever.
                guard changes.capacity <= Mailbox.largestKeptBatch else { return nil }
                // In place, unless the delegate kept the array (then a new one of that size).
                changes.removeAll(keepingCapacity: true)
                return changes
            case .taken:
                return nil
            }
        }

        /// Moves the item at `index` out of `items`, leaving ``taken``: no copy to retain and
        /// no second release when the run is emptied.
        static func take(_ index: Int, in items: inout [Item]) -> Item {
            var item = Item.taken
            swap(&item, &items[index])
            return item
        }
    }

    /// Blocks of this mailbox may run long: the thread that runs them lets a standby take over
    /// the reading of the kernel queue when one does (``DirectoryWatcher/Delivery/automatic``).
    /// False for ``DirectoryWatcher/Delivery/eventLoopThread``, whose callbacks promise to be short.
    let mayBlock: Bool

    private let lock = Lock()
    // Touched under `lock` alone: the runtime's exclusivity checks would only cost time.
    @exclusivity(unchecked) private var items: [Item] = []
    /// The drainer's last run, emptied: swapped in for the next, so that a mailbox that delivers
    /// a batch a wake-up allocates no array for it (one taken and replaced by `[]` did).
    @exclusivity(unchecked) private var spare: [Item] = []
    @exclusivity(unchecked) private var scheduled = false
    /// The storage of a batch delivered, emptied: the router's next batch for this watcher is
    /// collected in it (``append(batch:of:ends:refilling:)``), so that a batch a wake-up
    /// allocates nothing, and grows no array change by change.
    @exclusivity(unchecked) private var spareBatch: [DirectoryChange] = []
    /// The most changes a kept batch's storage holds.
    static let largestKeptBatch = 4_096

    init(mayBlock: Bool) {
        self.mayBlock = mayBlock
    }

    /// Appends `block`; true when the mailbox was idle and the caller must see that it is drained.
    func append(_ block: @escaping Block) -> Bool {
        append(.block(block))
    }

    /// Appends a subscription's batch, and gives `pending` (empty) the storage of a batch
    /// delivered earlier, when there is one; true when the mailbox was idle and the caller must
    /// see that it is drained.
    func append(
        batch: [DirectoryChange], of subscription: Subscription, ends: Bool, refilling pending: inout [DirectoryChange]
    ) -> Bool {
        lock.withLock {
            items.append(.batch(subscription, batch, ends: ends))
            if spareBatch.capacity > pending.capacity { swap(&spareBatch, &pending) }
            guard !scheduled else { return false }
            scheduled = true
            return true
        }
    }

    /// Appends `item`; true when the mailbox was idle and the caller must see that it is drained.
    func append(_ item: Item) -> Bool {
        lock.withLock {
            items.append(item)
            guard !scheduled else { return false }
            scheduled = true
            return true
        }
    }

    /// The drainer: every item appended so far, or nil (and the mailbox idle again) when none is
    /// left.
    func next() -> [Item]? {
        lock.withLock {
            if items.isEmpty {
                scheduled = false
                return nil
            }
            var taken = spare
            spare = []
            swap(&taken, &items)
            return taken
        }
    }

    /// Gives back a run ``next()`` returned, once its items have run, for its storage to be used
    /// again, with the storage of the last batch it delivered (``Item/run()``).
    func recycle(_ run: consuming [Item], batch: consuming [DirectoryChange]?) {
        var run = run
        run.removeAll(keepingCapacity: true)
        var batch = batch
        lock.withLock {
            spare = run
            if var storage = batch.take(), storage.capacity > spareBatch.capacity { swap(&storage, &spareBatch) }
        }
    }

    /// Runs items until none is left.
    func drain() {
        while var run = next() {
            var batch: [DirectoryChange]?
            for index in run.indices {
                if let storage = Item.take(index, in: &run).run() { batch = storage }
            }
            recycle(run, batch: batch)
        }
    }
}
