import Glibc

/// Subscribing and unsubscribing: a watcher's directory watched (its kept listing read at once
/// or, deferred, by the subscribing thread), and let go.
extension Router {
    /// A directory to list off the loop, and where the listing goes (``install(_:for:)``).
    struct ListingRequest: Sendable {
        let wd: Int32
        let path: FileSystemPath
    }

    /// The events routed for a kept directory while its first listing is read elsewhere.
    struct PendingListing {
        enum Step {
            case event(BackendEvent)
            case renamed(from: ArraySlice<UInt8>, to: ArraySlice<UInt8>, isDirectory: Bool)
            case movedOut(ArraySlice<UInt8>)
            case movedIn(ArraySlice<UInt8>, isDirectory: Bool)
            case exchanged(ArraySlice<UInt8>, ArraySlice<UInt8>)
        }

        var steps: [Step] = []
        var overflowed = false
    }

    /// Subscribes, listing a kept directory at once, on the loop.
    func subscribe(_ subscription: Subscription) -> SyscallError? {
        switch subscribe(subscription, deferringListing: false) {
        case .success: return nil
        case .failure(let error): return error
        }
    }

    /// Subscribes, leaving a kept directory's first listing to the caller, so that listing a
    /// huge directory holds up only the thread that asked to watch it: the caller lists the
    /// request's directory and hands the listing to ``install(_:for:)``. Meanwhile the events
    /// about the directory are kept, and applied to the listing when it arrives.
    func subscribeDeferringListing(_ subscription: Subscription) -> Result<ListingRequest?, SyscallError> {
        subscribe(subscription, deferringListing: true)
    }

    private func subscribe(_ subscription: Subscription, deferringListing: Bool) -> Result<
        ListingRequest?, SyscallError
    > {
        assert(services.isOnLoopThread())
        // Stopped before this task ran: its unsubscribe came first, and would leave it here.
        guard subscription.gate.isOpen else { return .success(nil) }
        if subscription.pollingInterval != nil {
            do {
                try subscribePolled(subscription)
            } catch {
                return .failure(error)
            }
            return .success(nil)
        }
        if subscription.marking != .no {
            do throws(SyscallError) {
                try subscribeMarked(subscription)
                startFromSavedState(subscription)
                return .success(nil)
            } catch {
                if subscription.marking == .required { return .failure(error) }
                subscription.loop.markRefusal = error.detail ?? error.description
            }
        }
        if let unavailable = services.inotifyUnavailable { return .failure(unavailable) }
        do {
            // A kept snapshot follows every change of name, whatever the watcher selected.
            let names = subscription.keepsSnapshot ? EventMask.names : 0
            let wd = try table.add(
                subscription, directory: subscription.root, mask: subscription.mask,
                also: names, only: subscription.entry,
                node: { wd in
                    guard subscription.recursive else { return nil }
                    let tree = WatchedTree(rootPath: subscription.root, wd: wd)
                    subscription.loop.tree = tree
                    return tree.root
                })
            subscription.loop.descriptors = [wd]
            admit(subscription)
            // Paused from here on: what the watcher was told is its saved state.
            defer { startFromSavedState(subscription) }
            // A tree is walked here, on the loop: each directory is watched before it is listed.
            if let tree = subscription.loop.tree {
                followMounts(subscription, from: mountTableNow())
                populate(tree.root, of: tree, for: subscription, reporting: false, foundByRescan: false)
                return .success(nil)
            }
            // The directory as it is when watching starts; without it (unreadable), an overflow is
            // reported as a notice only.
            guard subscription.keepsSnapshot && !known.contains(wd) && listings.pending[wd] == nil else {
                return .success(nil)
            }
            if deferringListing {
                listings.pending[wd] = PendingListing()
                expectListingEcho(wd)
                return .success(ListingRequest(wd: wd, path: subscription.root))
            }
            if let snapshot = list(subscription.root, wd: wd) { known[wd] = KnownDirectory(snapshot) }
            return .success(nil)
        } catch {
            return .failure(error)
        }
    }

    /// Records a subscription whose watches are in place.
    func admit(_ subscription: Subscription) {
        subscriptions[ObjectIdentifier(subscription)] = subscription
        if subscription.keepsSnapshot {
            subscription.onBacklogDrained = services.wakeForCatchUp
        }
    }

    /// The listing a ``subscribeDeferringListing(_:)`` caller read (nil: the directory could not
    /// be read), with the events routed since applied to it in order. Applying an event the
    /// listing already shows changes nothing (a creation of a name it holds, a removal of one it
    /// does not), so it does not matter when the listing was read. An overflow meanwhile is
    /// followed by a rescan.
    func install(_ snapshot: Snapshot?, for request: ListingRequest) {
        install(listed: snapshot.map { KnownDirectory.entries(of: $0) }, for: request)
    }

    /// ``install(_:for:)`` with the listing's entries in a table already, in the listing's order
    /// (``KnownDirectory/listedEntries(_:system:)``).
    func install(listed entries: NameTable<KnownDirectory.Known>?, for request: ListingRequest) {
        assert(services.isOnLoopThread())
        guard let pending = listings.pending.removeValue(forKey: request.wd), let entries,
            table.watches(request.wd).contains(where: { $0.subscriber.keepsSnapshot && !$0.subscriber.loop.isEnded })
        else { return }
        let directory = KnownDirectory(entries: entries)
        for step in pending.steps {
            switch step {
            case .event(let event): _ = directory.apply(event, at: wallNow)
            case .renamed(let from, let to, let isDirectory):
                if directory.contains(from) {
                    directory.renamed(from: from, to: to, isDirectory: isDirectory, at: wallNow)
                } else if !directory.contains(to) {
                    directory.putIn(to, nil, isDirectory: isDirectory, at: wallNow)
                }
            case .movedOut(let name): _ = directory.takeOut(name)
            case .exchanged(let first, let second):
                if directory.contains(first) && directory.contains(second) { directory.exchange(first, second) }
            case .movedIn(let name, let isDirectory):
                directory.putIn(name, nil, isDirectory: isDirectory, at: wallNow)
            }
        }
        known[request.wd] = directory
        if directory.lacksInodes { lacksInodes(request.wd, directory) }
        if pending.overflowed { listings.rescanOwed = true }
    }

    func unsubscribe(_ subscription: Subscription) {
        assert(services.isOnLoopThread())
        guard subscriptions.removeValue(forKey: ObjectIdentifier(subscription)) != nil else { return }
        if !subscription.loop.isEnded { end(subscription) }
        subscription.loop.catchUp = nil
        subscription.loop.pause = nil
        // Nothing of this wake-up is handed over: not even an empty batch to its queue.
        subscription.loop.pending = []
        outbox.dirty.removeAll { $0 === subscription }
        timed.settling.removeAll { $0 === subscription }
        listings.resumes.removeAll { $0 === subscription }
        complete(barriers.take(allOf: ObjectIdentifier(subscription)))
        // Its saves waiting are told it ended.
        if listings.saves.contains(where: { $0.subscription === subscription }) { takeDueSaves() }
    }

    func end(_ subscription: Subscription) {
        subscription.loop.isEnded = true
        if subscription.loop.polled != nil {
            subscription.loop.polled = nil
            timed.polled.removeAll { $0 === subscription }
        }
        for wd in subscription.loop.descriptors { release(wd, for: subscription) }
        subscription.loop.descriptors = []
        subscription.loop.tree = nil
        if subscription.loop.markedFileSystem != nil { markedTreeEnded(subscription) }
        if subscription.loop.followsMounts { stopFollowingMounts(subscription) }
    }

    /// Takes `subscription` off the kernel watch `wd`.
    func release(_ wd: Int32, for subscription: Subscription) {
        subscription.gitIgnores?.forget(wd)
        if table.remove(subscription, from: wd) && !MarkedDescriptors.contains(wd) { table.backend.unwatch(wd) }
        // Kept while a watcher of the directory keeps snapshots (a notice-only watcher that
        // stays has no use for it).
        if !table.watches(wd).contains(where: { $0.subscriber.keepsSnapshot }) {
            known[wd] = nil
            listings.pending[wd] = nil
            learning.remove(wd)
        }
        if MarkedDescriptors.contains(wd) && table.watches(wd).isEmpty { marked.forget(wd) }
    }
}
