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
        /// What ``run(_:of:keeping:)`` leaves behind.
        case taken

        /// Runs the item at `index` of a drainer's `run`, leaving ``taken`` there (moved out: no
        /// copy to retain, and no second release when the run is emptied). A batch's array,
        /// emptied, goes to `kept`, for its storage to hold a later batch (unless it is too large
        /// to keep).
        static func run(_ index: Int, of run: inout [Item], keeping kept: inout [DirectoryChange]?) {
            var item = Item.taken
            swap(&item, &run[index])
            switch consume item {
            case .block(let block):
                block()
            case .batch(let subscription, var changes, let ends):
                subscription.deliverHandedOver(changes, ends: ends)
                // A rescan's batch of many thousand changes is not kept for ever.
                guard changes.capacity <= Mailbox.largestKeptBatch else { return }
                // In place, unless the delegate kept the array (then a new one of that size, with
                // nothing copied: the standard library's emptying, which an element-by-element
                // one would not be on shared storage).
                changes.removeAll(keepingCapacity: true)
                kept = changes
            case .taken:
                break
            }
        }
    }

    /// Blocks of this mailbox may run long: the thread that runs them lets a standby take over
    /// the reading of the kernel queue when one does (``DirectoryWatcher/Delivery/automatic``).
    /// False for ``DirectoryWatcher/Delivery/eventLoopThread``, whose callbacks promise to be short.
    let mayBlock: Bool

    private let lock = Lock()
    // Touched under `lock` alone: the runtime's exclusivity checks would only cost time.
    @exclusivity(unchecked) private var items: [Item] = []
    /// The drainer's last run, emptied, between drains: swapped in for the next, so that a
    /// mailbox that delivers a batch a wake-up allocates no array for it.
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
            return schedule()
        }
    }

    /// Appends `item`; true when the mailbox was idle and the caller must see that it is drained.
    func append(_ item: Item) -> Bool {
        lock.withLock {
            items.append(item)
            return schedule()
        }
    }

    /// Under `lock`, after an append: true when the mailbox was idle (it is scheduled now).
    private func schedule() -> Bool {
        guard !scheduled else { return false }
        scheduled = true
        return true
    }

    /// The drainer's turn: gives back the storage of the run it has finished (`run`, its items
    /// all taken) and of the last batch it delivered (`kept`), and takes every item appended
    /// since into `run`; false, and the mailbox idle again, when none was. One lock a turn: a
    /// drain that delivers one batch locks twice.
    func next(into run: inout [Item], keeping kept: inout [DirectoryChange]?) -> Bool {
        run.removeAllKeepingCapacity()
        return lock.withLock {
            if var storage = kept.take(), storage.capacity > spareBatch.capacity { swap(&storage, &spareBatch) }
            if run.capacity < spare.capacity { swap(&run, &spare) }
            guard !items.isEmpty else {
                scheduled = false
                // The run's storage waits for the next drain's first turn.
                swap(&run, &spare)
                return false
            }
            // The run's emptied storage collects the next appends.
            swap(&run, &items)
            return true
        }
    }

    /// Runs items until none is left.
    func drain() {
        var run: [Item] = []
        var kept: [DirectoryChange]?
        drain(continuing: &run, keeping: &kept)
    }

    /// Runs items until none is left, after a turn a drainer has finished (`run`, its items all
    /// taken).
    func drain(continuing run: inout [Item], keeping kept: inout [DirectoryChange]?) {
        while next(into: &run, keeping: &kept) {
            for index in run.indices { Item.run(index, of: &run, keeping: &kept) }
        }
    }
}
