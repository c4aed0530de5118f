import Glibc

/// The router's own listings: inodes learnt for entries events created, and the echo of a
/// listing (its own open, read and close of the directory) told from a watcher's change.
extension Router {
    /// Lists the directories lacking inodes now, as the loop does once it has been idle (tests:
    /// what the idle listing learns, without waiting for the loop to be idle).
    func learnInodesNow() {
        assert(services.isOnLoopThread())
        if !learning.isEmpty { learnInodes(at: nil) }
    }

    func lacksInodes(_ wd: Int32, _ directory: KnownDirectory) {
        learning.add(wd)
        directory.isDueForLearning = true
    }

    /// Lists the names of the directories with entries whose inode is not on record, and records
    /// those inodes, so that a rescan can follow such a file to a new name. A directory stays due
    /// while it has entries that may have been born in the birth clock's current tick. `now`: when
    /// the schedule called for it (nil when a test did).
    func learnInodes(at now: UInt64?) {
        let start = services.birthClock()
        let began = services.wallClock()
        var due: Set<Int32> = []
        for wd in learning.due {
            guard let directory = known[wd] else { continue }
            directory.isDueForLearning = false
            guard directory.lacksInodes,
                let first = table.watches(wd).first(where: { !$0.subscriber.loop.isEnded })
            else { continue }
            guard learnInodes(of: directory, at: first.directory, wd: wd, listedAfter: start) else {
                continue  // gone or unreadable: its own events, or the next rescan, will say
            }
            if directory.lacksInodes {
                directory.isDueForLearning = true
                due.insert(wd)
            }
        }
        let end = services.wallClock()
        let took = (end.seconds - began.seconds) * 1_000_000_000 + Int64(end.nanoseconds) - Int64(began.nanoseconds)
        learning.listed(stillDue: due, took: UInt64(clamping: took), at: now)
    }

    /// Below one name lacking its inode in this many entries, the names are read one by one
    /// rather than the directory listed.
    static let entriesPerStatus = 4

    /// Learns the inodes `directory` (at `path`, watched as `wd`) lacks; false when it could not
    /// be read. A few names among many (files made one by one in a large directory) are read a
    /// status each, which costs about what a listing pays for three entries, where a listing
    /// reads them all (Docs/benchmarks.md); otherwise, or should a status fail where a listing
    /// may not (a directory that can be read but not searched), the names are listed.
    private func learnInodes(
        of directory: KnownDirectory, at path: FileSystemPath, wd: Int32, listedAfter start: Snapshot.Time
    ) -> Bool {
        if let readInodes = services.readInodes,
            let names = directory.namesLackingInodes(atMost: directory.entries.count / Self.entriesPerStatus)
        {
            do {
                try directory.learnInodes(listedAfter: start) { visit throws(SyscallError) in
                    try readInodes(path, names, visit)
                }
                return true
            } catch {
                // Listed instead, below.
            }
        }
        let listNames = services.listNames
        do {
            try directory.learnInodes(listedAfter: start) { visit throws(SyscallError) in
                try listNames(path) { name, inode, _ in visit(name, inode) }
            }
        } catch {
            return false
        }
        expectListingEcho(wd)
        return true
    }

    /// Lists a watched directory, expecting the echo of its own reading.
    func list(_ directory: FileSystemPath, wd: Int32) -> Snapshot? {
        guard let snapshot = try? services.listDirectory(directory) else { return nil }
        expectListingEcho(wd)
        return snapshot
    }

    /// The router is listing the directory of `wd`: its open, reads and close come back as events
    /// when a watcher of it asked for those (no entry kept otherwise, so that routing an event
    /// does not look this set up for ever after a tree of 100,000 directories was listed).
    func expectListingEcho(_ wd: Int32) {
        let echo = EventMask.open | EventMask.access | EventMask.closeNoWrite
        if let mask = table.kernelMask(wd), mask & echo != 0 { listings.echoes.insert(wd) }
    }

    /// The open, reads and close of a directory the router listed, which the kernel reports on
    /// the directory itself. The echo ends with its close, or with the first other event of the
    /// directory (when nobody asked for closes, none comes).
    func isListingEcho(_ event: BackendEvent) -> Bool {
        guard listings.echoes.contains(event.wd) else { return false }
        let echo = EventMask.open | EventMask.access | EventMask.closeNoWrite
        guard event.name.isEmpty, event.has(EventMask.isDirectory), event.mask & ~EventMask.isDirectory & ~echo == 0
        else {
            listings.echoes.remove(event.wd)
            return false
        }
        if event.has(EventMask.closeNoWrite) { listings.echoes.remove(event.wd) }
        return true
    }
}
