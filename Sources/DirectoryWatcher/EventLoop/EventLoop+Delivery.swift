/// Running the callbacks the router scheduled, on the leader, with a standby awake for those that
/// may block.
extension EventLoop {
    /// Runs the ready mailboxes in order until none is left or the kernel queue is due a read
    /// (the rest run after it), `started` being the wake-up's time. False when this thread was
    /// deposed in a callback.
    func deliverReady(started: UInt64) -> Bool {
        guard readyHead < ready.count else { return true }
        while readyHead < ready.count {
            let mailbox = ready[readyHead]
            readyHead += 1
            guard run(mailbox) else { return false }
            if readyHead < ready.count, clock() &- started > Self.readingSlice { return true }
        }
        ready.removeAllKeepingCapacity()
        readyHead = 0
        return true
    }

    /// Drains `mailbox`. A block that may block runs in the callback phase with a standby awake;
    /// when the standby took the lead meanwhile, this thread no longer leads: it runs the rest of
    /// this watcher's deliveries (no other thread will, the mailbox being scheduled) and returns
    /// false without touching the leader's state again.
    private func run(_ mailbox: Mailbox) -> Bool {
        var run: [Mailbox.Item] = []
        var kept: [DirectoryChange]?
        while mailbox.next(into: &run, keeping: &kept) {
            for index in run.indices {
                guard mailbox.mayBlock else {
                    Mailbox.Item.run(index, of: &run, keeping: &kept)
                    continue
                }
                resumeCallback(true)
                Mailbox.Item.run(index, of: &run, keeping: &kept)
                guard leadership.leaveCallback() else {
                    for rest in (index + 1)..<run.count { Mailbox.Item.run(rest, of: &run, keeping: &kept) }
                    mailbox.drain(continuing: &run, keeping: &kept)
                    return false
                }
            }
        }
        return true
    }

    func resumeCallback(_ inCallback: Bool) {
        guard inCallback else { return }
        leadership.enterCallback()
        threads.ensureStandby(start: startStandby)
    }
}
