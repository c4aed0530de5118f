import Glibc

/// Trees and the mount table: the end of the mount a tree's root is on (see <doc:WatchingATree>,
/// "Mounts").
///
/// While a tree watches, the loop polls `/proc/self/mountinfo` (proc(5): a change of the mount
/// table makes it report `EPOLLPRI`), and the router compares the table with the last one read,
/// by mount id:
///
/// - The mount a tree's root was on at the start is gone (`umount`, `umount -l`): the tree ends
///   with ``DirectoryChange/Kind/rootRemoved``, as an inotify tree does on `IN_UNMOUNT`. A
///   fanotify tree hears nothing else: its mark's descriptor of the mount keeps the file system
///   alive, and fanotify has no event for its end. (An inotify tree hears it from the table too
///   when something else keeps the file system alive, a process's working directory in it.)
extension Router {
    /// The mount table now, read whole; while it is polled, what changed since the last reading
    /// is handled first (so that a tree starting now starts from the table it reads).
    func mountTableNow() -> [MountTable.Mount] {
        let read = MountTable.mounts(in: table.system.readProcFile("/proc/self/mountinfo") ?? "")
        if let last = mounts, last != read {
            mounts = read
            mountsChanged(from: last, to: read)
        }
        return read
    }

    /// The loop's poll of the mount table fired: what changed is handled.
    func mountTableChanged(now: UInt64) {
        assert(isOnLoopThread())
        guard mounts != nil else { return }
        beginRead(now: now)
        _ = mountTableNow()
    }

    /// A tree that starts follows the mount table, from `read` (read before its directories were
    /// watched, so that a mount made meanwhile is a change of the table): the mount its root is on
    /// is noted, and the loop polls the table while a tree follows it.
    func followMounts(_ subscription: Subscription, from read: [MountTable.Mount]) {
        subscription.loop.rootMount = MountTable.mount(of: subscription.root, in: read)?.id
        subscription.loop.followsMounts = true
        mountWatchers.append(subscription)
        guard mounts == nil else { return }
        do {
            try openMountPoll()
        } catch {
            return  // (no poll: mounts are not followed; nothing else is lost)
        }
        mounts = read
        // What changed before the poll was open.
        _ = mountTableNow()
    }

    /// A tree that followed the mount table ends: the poll goes with the last one.
    func stopFollowingMounts(_ subscription: Subscription) {
        subscription.loop.followsMounts = false
        mountWatchers.removeAll { $0 === subscription }
        if mountWatchers.isEmpty, mounts != nil {
            mounts = nil
            closeMountPoll()
        }
    }

    /// What a change of the mount table means for each tree that follows it: one whose root's
    /// mount is gone ends.
    private func mountsChanged(from last: [MountTable.Mount], to read: [MountTable.Mount]) {
        let readIDs = Set(read.map(\.id))
        let gone = last.filter { !readIDs.contains($0.id) }
        for subscription in mountWatchers where !subscription.loop.isEnded {
            if let id = subscription.loop.rootMount, gone.contains(where: { $0.id == id }) {
                collect(
                    DirectoryChange(kind: .rootRemoved, path: subscription.root, isDirectory: true), for: subscription)
            }
        }
    }
}
