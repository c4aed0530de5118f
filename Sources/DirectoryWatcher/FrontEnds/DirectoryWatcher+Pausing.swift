import Dispatch
import Glibc

/// Pausing and resuming: the watcher's changes are held by the router while paused, and come as
/// one batch on resuming.
extension DirectoryWatcher {
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
}
