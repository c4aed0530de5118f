import Glibc

/// Pausing and resuming: what a paused watcher was told is kept, and on resuming one batch says
/// what changed meanwhile.
extension Router {
    /// Pauses a watcher: what it has been told of its directories is kept, and its changes are no
    /// longer collected, only which directories had events (see ``resume(_:)``). What waited to
    /// be handed over (pending, or settling) is handed over now: it happened before the pause.
    func pause(_ subscription: Subscription) {
        assert(services.isOnLoopThread())
        if subscription.loop.pause?.isDue == true {
            // Paused again before its resuming listings: it stays paused, as it was.
            subscription.loop.pause?.isDue = false
            listings.resumes.removeAll { $0 === subscription }
            complete(barriers.take(.resume(ObjectIdentifier(subscription))))
            return
        }
        guard subscription.loop.pause == nil, !subscription.loop.isEnded,
            subscriptions[ObjectIdentifier(subscription)] === subscription
        else { return }
        if subscription.loop.settler != nil {
            release(subscription, force: true)
            subscription.loop.settler?.forgetWriters()
        }
        var pause = Subscription.Pause(baseline: [:])
        if var catchUp = subscription.loop.catchUp {
            // Owed a catch-up: what it was told is what it knew when its backlog overflowed, and
            // the changes it missed since are found on resuming, with every directory listed.
            // Those collected in this wake-up are among them, as a catch-up's own are
            // (``takeCatchUp(_:)``): handed over now too, they would come twice.
            if !subscription.loop.pending.isEmpty {
                catchUp.dropped += subscription.loop.pending.count
                subscription.loop.pending = []
                outbox.dirty.removeAll { $0 === subscription }
            }
            subscription.loop.catchUp = nil
            // No longer owed: a backlog that overflows again after the pause owes a catch-up of
            // its own (while still marked overflowing, its changes would be dropped for good).
            subscription.loop.isOverflowing = false
            listings.catchUps.removeAll { $0 === subscription }
            pause.baseline = catchUp.baseline
            pause.lostEvents = true
            pause.owed =
                [
                    DirectoryChange(
                        kind: .overflow, path: subscription.root, isDirectory: true,
                        droppedChanges: catchUp.remainder.count + catchUp.dropped)
                ] + catchUp.remainder
            complete(barriers.take(.catchUp(ObjectIdentifier(subscription))))
        }
        for wd in subscription.loop.descriptors where pause.baseline[wd] == nil {
            if let entries = known.entries(wd) { pause.baseline[wd] = entries }
        }
        flushBatches()
        subscription.loop.pause = pause
    }

    /// Ends a watcher's pause: hands over one batch, what changed while it was paused (possibly
    /// nothing), marked ``DirectoryChange/whilePaused``. Only directories that had events are
    /// listed, once the kernel queue is drained (what it still holds would otherwise be reported
    /// twice); with none, the batch goes at once, with no system call.
    func resume(_ subscription: Subscription) {
        assert(services.isOnLoopThread())
        guard var pause = subscription.loop.pause else {
            // Not paused here (ended meanwhile): the front end's pause still ends.
            schedule(subscription.handOverResumed([]))
            return
        }
        guard !pause.isDue else { return }
        if subscription.loop.polled != nil {
            // A poll says what changed while paused: nothing was polled meanwhile.
            subscription.loop.pause = nil
            var found = poll(subscription, now: services.clock())
            for index in found.indices { found[index].whilePaused = true }
            let ending = found.filter(ChangeTranslation.endsWatch)
            found.removeAll(where: ChangeTranslation.endsWatch)
            schedule(subscription.handOverResumed(pause.owed + found))
            for change in ending { collect(change, for: subscription) }
            return
        }
        let descriptors = subscription.loop.descriptors
        let changed = pause.lostEvents || descriptors.contains { pause.touched.contains($0) }
        guard subscription.keepsSnapshot, !subscription.loop.isEnded,
            pause.lostEvents || descriptors.contains(where: { pause.touched.contains($0) || pause.baseline[$0] == nil })
        else {
            // Nothing to list: a watcher without snapshots is told to list again itself.
            if !subscription.keepsSnapshot && changed && !subscription.loop.isEnded {
                pause.owed.append(DirectoryChange(kind: .overflow, path: subscription.root, isDirectory: true))
            }
            subscription.loop.pause = nil
            schedule(subscription.handOverResumed(pause.owed))
            return
        }
        pause.isDue = true
        subscription.loop.pause = pause
        listings.resumes.append(subscription)
    }

    /// Lists the directories of the resuming watchers that changed while they were paused, and
    /// hands each its resuming batch.
    func resumeDue() {
        let due = listings.resumes
        listings.resumes = []
        var descriptors: Set<Int32> = []
        for subscription in due where !subscription.loop.isEnded {
            guard let pause = subscription.loop.pause else { continue }
            for wd in subscription.loop.descriptors
            where pause.lostEvents || pause.touched.contains(wd) || pause.baseline[wd] == nil {
                descriptors.insert(wd)
            }
        }
        rescan(Array(descriptors), afterKernelOverflow: false, takingCatchUps: false)
        for subscription in due {
            guard let pause = subscription.loop.pause, pause.isDue else { continue }
            subscription.loop.pause = nil
            schedule(subscription.handOverResumed(pause.owed + Self.pairMoves(pause)))
            if subscription.gitIgnores != nil { readGitIgnores(of: subscription.loop.descriptors, for: subscription) }
            complete(barriers.take(.resume(ObjectIdentifier(subscription))))
            // Through collect, behind that batch: a directory gone ends the watch.
            if let failure = pause.failure { collect(failureNotice(failure, for: subscription), for: subscription) }
        }
    }

    /// What a listing found of what changed in one directory of a resuming watcher since it
    /// paused, as far as the watcher selected and covers it. Its tree is up to date already: the
    /// events kept it so while it was paused.
    func found(
        _ differences: [Snapshot.Difference], by watch: WatchTable<Subscription>.Watch,
        before: [[UInt8]: KnownDirectory.Known], after: Snapshot
    ) {
        let subscription = watch.subscriber
        guard subscription.loop.pause?.reportsNothing != true else { return }
        let stopped = subscription.loop.pause?.standsForStop ?? false
        for difference in differences {
            guard ChangeTranslation.selects(watch.mask, difference.kind),
                watch.covers(difference.name[...]) || (difference.oldName.map { watch.covers($0[...]) } ?? false)
            else { continue }
            var change = DirectoryChange(
                kind: difference.kind, path: watch.path(of: difference.name[...]),
                oldPath: difference.oldName.map { watch.path(of: $0[...]) },
                isDirectory: difference.isDirectory, whilePaused: !stopped, whileStopped: stopped)
            if let exclusions = subscription.exclusions, exclusions.excludes(change, under: subscription.root) {
                continue
            }
            if subscription.gitIgnores != nil {
                guard let kept = gitFiltered(change, for: subscription) else { continue }
                change = kept
                change.whilePaused = !stopped
                change.whileStopped = stopped
            }
            subscription.loop.pause?.found.append(change)
            // Across restarts, a tree's entry moved from one of its directories to another is a
            // removal here and a creation there: their inodes pair them (``pairMoves(_:)``).
            guard stopped, subscription.recursive else { continue }
            let index = subscription.loop.pause?.found.indices.last ?? 0
            switch difference.kind {
            case .removed:
                if let known = before[difference.name], let inode = known.knownInode, inode != 0 {
                    subscription.loop.pause?.foundMoves[index] = .removed(known)
                }
            case .created:
                if let entry = after.entries[difference.name] {
                    subscription.loop.pause?.foundMoves[index] = .created(entry)
                }
            default:
                break
            }
        }
    }

    /// The found changes of a tree restarted from a saved state, with each removal and creation
    /// of one file (the same inode, and the same birth where it was known) made one rename, where
    /// the creation was.
    static func pairMoves(_ pause: Subscription.Pause) -> [DirectoryChange] {
        guard !pause.foundMoves.isEmpty else { return pause.found }
        var removedAt: [UInt64: [(index: Int, known: KnownDirectory.Known)]] = [:]
        var createdAt: [UInt64: [(index: Int, entry: Snapshot.Entry)]] = [:]
        for (index, side) in pause.foundMoves {
            switch side {
            case .removed(let known): removedAt[known.knownInode ?? 0, default: []].append((index, known))
            case .created(let entry): createdAt[entry.inode, default: []].append((index, entry))
            }
        }
        var changes = pause.found
        var dropped = Set<Int>()
        for (inode, removals) in removedAt {
            guard removals.count == 1, let creations = createdAt[inode], creations.count == 1,
                removals[0].known.isSameFile(as: creations[0].entry)
            else { continue }
            let removed = changes[removals[0].index]
            let created = changes[creations[0].index]
            changes[creations[0].index] = DirectoryChange(
                kind: .renamed, path: created.path, oldPath: removed.path, isDirectory: created.isDirectory,
                whileStopped: true)
            dropped.insert(removals[0].index)
        }
        return changes.enumerated().filter { !dropped.contains($0.offset) }.map(\.element)
    }
}
