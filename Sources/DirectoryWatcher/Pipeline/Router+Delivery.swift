import Glibc

/// Delivery: settling watchers' batches held until due, batches handed over at the end of a
/// wake-up, and barriers completed behind the changes before them.
extension Router {
    func requestBarrier(for subscription: Subscription, completion: @escaping @Sendable () -> Void) {
        assert(services.isOnLoopThread())
        let request = BarrierRequest(subscription: subscription, completion: completion)
        // A mount made before the barrier was asked for, whose poll the loop has not read yet.
        if mountFollowing.table != nil, services.mountPollFired() { mountTableChanged(now: services.clock()) }
        if subscription.loop.isEnded {
            complete([request])
        } else if subscription.loop.polled != nil {
            // A polled watcher knows of a change once it polls: the barrier polls at once, and
            // completes behind what that found.
            if subscription.loop.pause == nil { pollAndCollect(subscription, now: services.clock()) }
            complete([request])
        } else if subscription.loop.markedFileSystem != nil {
            // The kernel queues an event before the call that made it returns: once the group's
            // queue has been read to its end, every change made before this request is routed.
            services.drainMarks()
            // Every record before the request is read: an exchange's other half would be among them.
            if held.isHolding { releaseHeldMove() }
            if listings.rescanOwed {
                barriers.wait(request, for: .rescan)
            } else {
                complete([request])
            }
        } else if barriers.request(request) {
            writeBarrier()
        }
    }

    // MARK: - Settling

    /// A settling watcher's change waits in its batch until the batch is due; one that ends the
    /// watch hands the batch over at once.
    func settle(_ change: DirectoryChange, for subscription: Subscription) {
        if subscription.loop.settler!.add(change, now: now) { timed.settling.append(subscription) }
        if ChangeTranslation.endsWatch(change) { release(subscription, force: true) }
    }

    /// Hands over the settling watchers' batches that are due.
    func releaseSettled() {
        var index = 0
        while index < timed.settling.count {
            let subscription = timed.settling[index]
            if let due = subscription.loop.settler?.deadline, now >= due {
                release(subscription, force: false)
            } else {
                index += 1
            }
        }
    }

    /// Hands a settling watcher's batch over (when due, or `force`d), then the barriers that
    /// waited for it.
    func release(_ subscription: Subscription, force: Bool) {
        guard let batch = takeSettled(subscription, force: force) else { return }
        for change in batch where subscription.collect(change) { outbox.dirty.append(subscription) }
        complete(barriers.take(.settling(ObjectIdentifier(subscription))))
    }

    /// A settling watcher's batch when it is due (or `force`d), as it is to be handed over.
    func takeSettled(_ subscription: Subscription, force: Bool) -> [DirectoryChange]? {
        guard var batch = subscription.loop.settler?.take(now: now, force: force) else { return nil }
        timed.settling.removeAll { $0 === subscription }
        if subscription.loop.contents != nil {
            let system = table.system
            batch = subscription.loop.contents!.filter(batch) { system.contentDigest(of: $0) }
        }
        return batch
    }

    /// A settling watcher's backlog just overflowed. What it was told is taken to be what its
    /// directories are known to be now, and that includes the changes still settling: they go
    /// with the catch-up's remainder, after what did not fit (they came later), and the barriers
    /// that waited for them wait for the catch-up. What settles from here on happened after
    /// what the watcher knew: the catch-up's listing reports it (``takeCatchUp(_:)`` drops it).
    /// Left to settle with what came after, a change that did not fit would be folded into
    /// later ones it came before (a file made, in the remainder, and written since, in the
    /// settler, would read as one made over an entry that was there, and be told removed).
    func settlingOverflowed(_ subscription: Subscription) {
        guard subscription.loop.settler != nil, subscription.loop.catchUp != nil,
            let settling = takeSettled(subscription, force: true)
        else { return }
        subscription.loop.catchUp?.remainder += settling
        for request in barriers.take(.settling(ObjectIdentifier(subscription))) {
            barriers.wait(request, for: .catchUp(ObjectIdentifier(subscription)))
        }
    }

    func flushBatches() {
        if !outbox.unwatchedTrees.isEmpty { reportUnwatched() }
        // Taken out of the outbox while it is gone through (a swap: no retain of its storage),
        // and put back emptied, for its storage to serve the next wake-up.
        var dirty: [Subscription] = []
        swap(&dirty, &outbox.dirty)
        defer {
            dirty.removeAllKeepingCapacity()
            if outbox.dirty.isEmpty { swap(&dirty, &outbox.dirty) }
        }
        for subscription in dirty {
            // Owed a catch-up: its changes until then are what the catch-up will report.
            if subscription.loop.catchUp != nil && !subscription.loop.endsWithBatch {
                subscription.loop.catchUp?.dropped += subscription.loop.pending.count
                subscription.loop.pending = []
                continue
            }
            let wasOverflowing = subscription.loop.isOverflowing
            schedule(subscription.flush())
            if !wasOverflowing, subscription.loop.catchUp != nil {
                // The backlog just overflowed: what the watcher has been told of its
                // directories is what they are known to be now, minus what did not fit.
                for wd in subscription.loop.descriptors {
                    if let entries = known.entries(wd) { subscription.loop.catchUp?.baseline[wd] = entries }
                }
                settlingOverflowed(subscription)
            }
        }
    }

    func schedule(_ mailbox: Mailbox?) {
        if let mailbox { outbox.ready.append(mailbox) }
    }

    // MARK: - Barriers

    func barrierReached() {
        let (satisfied, writeAgain) = barriers.reached()
        complete(satisfied)
        if writeAgain { writeBarrier() }
    }

    /// Hands every pending batch to its queue first, so each completion runs after the changes
    /// that came before it.
    func complete(_ requests: [BarrierRequest]) {
        guard !requests.isEmpty else { return }
        flushBatches()
        for request in requests {
            if request.subscription.loop.catchUp != nil && !request.subscription.loop.isEnded {
                barriers.wait(request, for: .catchUp(ObjectIdentifier(request.subscription)))
            } else if request.subscription.loop.pause?.isDue == true && !request.subscription.loop.isEnded {
                // Resuming: the barrier follows what changed while the watcher was paused.
                barriers.wait(request, for: .resume(ObjectIdentifier(request.subscription)))
            } else if request.subscription.loop.settler?.isEmpty == false && !request.subscription.loop.isEnded {
                // Changes from before the barrier wait to settle: the barrier follows them.
                barriers.wait(request, for: .settling(ObjectIdentifier(request.subscription)))
            } else {
                schedule(request.subscription.run(request.completion))
            }
        }
    }

    func writeBarrier() {
        while true {
            do {
                try services.writeBarrierFile()
                return
            } catch {
                // Without the write no event will come: complete what was in flight now rather
                // than never, and try again for what was waiting.
                let (satisfied, writeAgain) = barriers.reached()
                complete(satisfied)
                if !writeAgain { return }
            }
        }
    }
}
