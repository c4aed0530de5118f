import Dispatch
import Glibc

/// Barriers, and what the watcher watches now.
extension DirectoryWatcher {
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
                return tree.descriptors.compactMap { tree.node($0)?.uncachedPath }
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
            return tree.descriptors.compactMap { tree.node($0) }.map { ($0.uncachedPath, $0.wd, $0.inode) }
        } ?? []
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
}
