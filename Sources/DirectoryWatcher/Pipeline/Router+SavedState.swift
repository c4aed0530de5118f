/// Saved states: what a watcher has been told of its directories, taken at a moment when it has
/// been told everything the router has routed for it, and a start from such a state.
extension Router {
    /// A save waiting for its watcher to have nothing undelivered. `take` gets the state, or nil
    /// when the watch ended first.
    struct SaveRequest {
        let subscription: Subscription
        let take: (SavedDirectories?) -> Void
    }

    /// Takes the watcher's state as soon as everything the router has routed for it has been
    /// delivered (at once when it has), and hands it to `take` on the loop's thread.
    func requestSave(of subscription: Subscription, _ take: @escaping (SavedDirectories?) -> Void) {
        assert(services.isOnLoopThread())
        listings.saves.append(SaveRequest(subscription: subscription, take: take))
        takeDueSaves()
    }

    /// Takes the states of the watchers that now have nothing undelivered. The loop calls it after
    /// each wake-up's deliveries while a save waits; a watcher whose backlog is delivered on
    /// another thread wakes the loop for it (``backlogDrained(_:)``).
    func takeDueSaves() {
        guard !listings.saves.isEmpty else { return }
        let waiting = listings.saves
        listings.saves = []
        for request in waiting {
            let subscription = request.subscription
            guard !subscription.loop.isEnded, subscriptions[ObjectIdentifier(subscription)] === subscription else {
                request.take(nil)
                continue
            }
            if hasNothingUndelivered(subscription) {
                request.take(savedDirectories(of: subscription))
                continue
            }
            listings.saves.append(request)
            // Delivered elsewhere: that thread wakes the loop once it is done.
            if subscription.undelivered > 0 && !subscription.awaitDrain() { continue }
        }
    }

    /// Whether the watcher has been handed, and has taken, every change the router routed for
    /// it: nothing collected, settling, held for a pairing, owed by a rescan or a catch-up, or
    /// handed over and not yet delivered. What the router knows of its directories is then
    /// exactly what it was told (while paused: what it was told before the pause).
    private func hasNothingUndelivered(_ subscription: Subscription) -> Bool {
        let loop = subscription.loop
        guard loop.pending.isEmpty, loop.catchUp == nil, !loop.isOverflowing, loop.pause?.isDue != true,
            loop.settler?.isEmpty ?? true, pairing.isEmpty, !held.isHolding, !listings.rescanOwed,
            subscription.undelivered == 0
        else { return false }
        return loop.descriptors.allSatisfy { listings.pending[$0] == nil }
    }

    /// What the watcher has been told of each of its directories, with each directory's path
    /// below the root and its inode (a tree's directory renamed while nothing watched is found by
    /// it).
    private func savedDirectories(of subscription: Subscription) -> SavedDirectories {
        if subscription.loop.tree?.isLazy == true { finishSnapshots(of: subscription) }
        var saved = SavedDirectories(root: subscription.root)
        // Each inode on record is the file now at its name: nothing the router has read since
        // says otherwise, and the queue was read for this save. A file at that name with that
        // inode born by now is that file; one born later (its number given again while
        // nothing watched) is another.
        let vouched = services.birthClock()
        for wd in subscription.loop.descriptors {
            // Paused: what it was told before the pause (a directory the tree gained since is
            // news to it, and left out).
            let told = subscription.loop.pause != nil ? subscription.loop.pause?.baseline[wd] : known.entries(wd)
            guard var entries = told else { continue }
            if entries.hasEntriesFollowedByInode { entries.vouchForInodes(bornBy: vouched) }
            let node = subscription.loop.tree?.node(wd)
            saved.directories.append(
                SavedDirectories.Directory(
                    path: node.map { Self.pathBelowRoot($0, of: subscription) } ?? [],
                    inode: node?.isRoot == false ? node!.inode : 0, entries: entries))
        }
        return saved
    }

    /// A watcher starting from a saved state is paused from the moment its watches are in place,
    /// what it was told being the state: its events are not collected until
    /// ``resumeFromSavedState(_:queueDrained:)`` reports what changed since the state, then goes
    /// on live.
    func startFromSavedState(_ subscription: Subscription) {
        guard subscription.stateLoad != nil else { return }
        var pause = Subscription.Pause(baseline: [:])
        pause.lostEvents = true
        pause.standsForStop = true
        subscription.loop.pause = pause
    }

    /// Makes the state the watcher starts from what its pause began with (when the loop has not
    /// yet): a directory of its tree is matched with the state's by inode (it may have been
    /// renamed while nothing watched), else by its path; one the state does not hold is new, and
    /// everything in it is reported. Waits for the state's decoding when it is still going on.
    func adoptSavedState(of subscription: Subscription) {
        guard let load = subscription.stateLoad, let outcome = load.take() else { return }
        adoptSavedState(outcome, of: subscription)
    }

    private func adoptSavedState(_ outcome: StateLoad.Outcome, of subscription: Subscription) {
        guard subscription.loop.pause?.standsForStop == true else { return }
        var saved = SavedDirectories(root: subscription.root)
        switch outcome {
        case .state(let state): saved = state
        case .fresh(let notice): subscription.loop.pause?.owed.insert(notice, at: 0)
        case .refused: subscription.loop.pause?.reportsNothing = true
        }
        var byPath: [[UInt8]: Int] = [:]
        var byInode: [UInt64: Int] = [:]
        for (index, directory) in saved.directories.enumerated() {
            byPath[directory.path] = index
            if directory.inode != 0 { byInode[directory.inode] = index }
        }
        var moved: [Int: NameTable<KnownDirectory.Known>] = [:]
        for wd in subscription.loop.descriptors {
            var match = byPath[[]]
            if let node = subscription.loop.tree?.node(wd), !node.isRoot {
                match =
                    (node.inode != 0 ? byInode[node.inode] : nil) ?? byPath[Self.pathBelowRoot(node, of: subscription)]
            }
            guard let match else {
                subscription.loop.pause?.baseline[wd] = NameTable()
                continue
            }
            // Moved out of `saved`, so that the listing updates the table in place (a second
            // directory matched with the same one gets a copy).
            if let given = moved[match] {
                subscription.loop.pause?.baseline[wd] = given
                continue
            }
            let entries = saved.directories[match].entries
            saved.directories[match].entries = NameTable()
            moved[match] = entries
            subscription.loop.pause?.baseline[wd] = entries
        }
    }

    /// The state's table for `wd` of a watcher starting from a saved state, once the decoding has
    /// ended, taken out of its pause (for the listing to update in place); nil while decoding.
    func takeSavedTable(_ wd: Int32, of subscription: Subscription, waiting: Bool) -> NameTable<KnownDirectory.Known>? {
        if let load = subscription.stateLoad, !load.isTaken {
            guard let outcome = waiting ? load.take() : load.takeIfReady() else { return nil }
            adoptSavedState(outcome, of: subscription)
        }
        return subscription.loop.pause?.baseline.removeValue(forKey: wd) ?? NameTable()
    }

    /// A tree's directory's path below the watcher's root; empty for the root.
    private static func pathBelowRoot(_ node: TreeNode, of subscription: Subscription) -> [UInt8] {
        guard !node.isRoot else { return [] }
        let path = node.path.bytes
        let root = subscription.root.bytes
        let start = root.count + (root.last == UInt8(ascii: "/") ? 0 : 1)
        return start < path.count ? Array(path[start...]) : []
    }

    /// Ends the pause ``startFromSavedState(_:)`` began: once the kernel queue is drained, every
    /// directory of the watcher is listed and compared with the state. A watcher of one directory
    /// compares the listing with the state as both are read (``restoreListing``); a tree's
    /// directories are matched with the state's first.
    func resumeFromSavedState(_ subscription: Subscription, queueDrained: Bool = false) {
        assert(services.isOnLoopThread())
        guard subscription.loop.pause?.standsForStop == true, subscription.stateLoad != nil else { return }
        // A fanotify tree lists its directories after it is ready: all of them first.
        if subscription.loop.tree?.isLazy == true { finishSnapshots(of: subscription) }
        if subscription.loop.tree != nil || subscription.loop.descriptors.count != 1 {
            adoptSavedState(of: subscription)
        }
        resume(subscription)
        // Listed now when the queue was just read empty (and no rename half waits), so that
        // the start returns with the comparison made: a change after it is live, not found.
        if queueDrained && pairing.isEmpty && !held.isHolding
            && listings.resumes.contains(where: { $0 === subscription })
        {
            resumeDue()
        }
    }
}

/// What a watcher had been told of its directories at one moment: what a saved state holds.
struct SavedDirectories: @unchecked Sendable {
    /// One directory: its path below the root (empty for the root), its inode (0 for the root,
    /// or when not known), and its entries.
    struct Directory {
        var path: [UInt8]
        var inode: UInt64
        var entries: NameTable<KnownDirectory.Known>
    }

    var root: FileSystemPath
    var directories: [Directory] = []
    /// The file system's clock (coarse) read before the kernel queue was last read for this
    /// state: a file last changed before it has had every change routed, and delivered.
    var readBefore = Snapshot.Time.unvouched
}

extension NameTable<KnownDirectory.Known> {
    /// Whether any entry is known by what events and a listing said, with an inode.
    fileprivate var hasEntriesFollowedByInode: Bool {
        var found = false
        forEach { _, known in
            if case .unsure(let unsure) = known, unsure.inode != 0 { found = true }
        }
        return found
    }

    /// Vouches for every inode on record as that of a file born by `time`.
    fileprivate mutating func vouchForInodes(bornBy time: Snapshot.Time) {
        var updated: [([UInt8], KnownDirectory.Known)] = []
        forEach { name, known in
            if case .unsure(var unsure) = known, unsure.inode != 0, !unsure.bornBy.isAfter(time) {
                unsure.bornBy = time
                updated.append((Array(name), .unsure(unsure)))
            }
        }
        for (name, known) in updated { updateValue(known, forName: name[...]) }
    }
}
