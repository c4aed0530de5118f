/// One watcher's deliveries waiting to run on the loop's threads, in order, one at a time.
///
/// The router appends blocks (a batch, a barrier completion) as it routes. A mailbox is either
/// idle or scheduled: the append that finds it idle schedules it, and the caller then owes it one
/// drain on some thread; the drain runs blocks until it finds the mailbox empty and marks it idle
/// again. So at most one thread drains a mailbox at a time, and blocks run in the order appended:
/// a watcher's callbacks never overlap and come in kernel order, whichever thread runs them.
final class Mailbox: @unchecked Sendable {
    typealias Block = @Sendable () -> Void

    /// Blocks of this mailbox may run long: the thread that runs them lets a standby take over
    /// the reading of the kernel queue when one does (``DirectoryWatcher/Delivery/automatic``).
    /// False for ``DirectoryWatcher/Delivery/eventLoopThread``, whose callbacks promise to be short.
    let mayBlock: Bool

    private let lock = Lock()
    private var blocks: [Block] = []
    /// The drainer's last run, emptied: swapped in for the next, so that a mailbox that delivers
    /// a batch a wake-up allocates no array for it (one taken and replaced by `[]` did).
    private var spare: [Block] = []
    private var scheduled = false

    init(mayBlock: Bool) {
        self.mayBlock = mayBlock
    }

    /// Appends `block`; true when the mailbox was idle and the caller must see that it is drained.
    func append(_ block: @escaping Block) -> Bool {
        lock.withLock {
            blocks.append(block)
            guard !scheduled else { return false }
            scheduled = true
            return true
        }
    }

    /// The drainer: every block appended so far, or nil (and the mailbox idle again) when none is
    /// left.
    func next() -> [Block]? {
        lock.withLock {
            if blocks.isEmpty {
                scheduled = false
                return nil
            }
            var taken = spare
            spare = []
            swap(&taken, &blocks)
            return taken
        }
    }

    /// Gives back a run ``next()`` returned, once its blocks have run, for its storage to be used
    /// again.
    func recycle(_ run: consuming [Block]) {
        var run = run
        run.removeAll(keepingCapacity: true)
        lock.withLock { spare = run }
    }

    /// Runs blocks until none is left.
    func drain() {
        while let run = next() {
            for block in run { block() }
            recycle(run)
        }
    }
}
