import Glibc

/// The router's part for polled watchers (``Subscription/pollingInterval``): where inotify
/// cannot see (a network or host-shared file system), a watcher lists its directories on a
/// schedule and reports the differences between two listings, with the change kinds of the
/// inotify backend (a rename is found by inode). The loop sleeps to the earliest watcher's next
/// poll (``Router/deadline``), so every polled watcher of a process is served by the loop's
/// thread, and nothing wakes while no watcher polls.
extension Router {
    /// Lists a polled watcher's directory (its whole tree, for a recursive one) and schedules
    /// its first poll. Throws when the directory cannot be listed.
    func subscribePolled(_ subscription: Subscription) throws(SyscallError) {
        let root = try services.listDirectory(subscription.root)
        var listings = [subscription.root: root]
        if subscription.recursive {
            var found: [DirectoryChange] = []
            addDirectories(below: subscription.root, listed: root, to: &listings, for: subscription, reporting: &found)
        }
        subscription.loop.polled = Subscription.Polled(
            listings: listings, schedule: PollSchedule(interval: subscription.pollingInterval!, now: services.clock()))
        subscriptions[ObjectIdentifier(subscription)] = subscription
        timed.polled.append(subscription)
    }

    /// Polls the polled watchers that are due.
    func pollDue() {
        let now = services.clock()
        for subscription in timed.polled where subscription.loop.pause == nil && !subscription.loop.isEnded {
            guard let due = subscription.loop.polled?.schedule.due, now >= due else { continue }
            pollAndCollect(subscription, now: now)
        }
    }

    /// Polls one watcher and collects what changed.
    func pollAndCollect(_ subscription: Subscription, now: UInt64) {
        for change in poll(subscription, now: now) { collect(change, for: subscription) }
    }

    /// Lists a polled watcher's directories again, parents before children, and returns what
    /// changed since the last poll, in the order ``Snapshot/differences(from:to:)`` gives per
    /// directory; schedules the next poll. A tree's directories that appeared are listed and
    /// their entries reported as created; those that went are forgotten; a renamed one keeps its
    /// listings under its new path.
    func poll(_ subscription: Subscription, now: UInt64) -> [DirectoryChange] {
        guard var state = subscription.loop.polled else { return [] }
        var changes: [DirectoryChange] = []
        let paths = state.listings.keys.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
        for path in paths {
            guard let old = state.listings[path] else { continue }  // gone or renamed meanwhile
            let current: Snapshot
            do throws(SyscallError) {
                // Most polls find nothing changed: checked without building a listing.
                if try services.isUnchanged(path, old) { continue }
                current = try services.listDirectory(path)
            } catch {
                if path == subscription.root {
                    // Gone (removed, or moved: a path cannot tell), or unreadable now.
                    var notice = failureNotice(error, for: subscription)
                    notice.foundByRescan = false
                    changes.append(notice)
                    break
                }
                // A directory of the tree that went: its parent's listing reports it.
                if error.errno == ENOENT || error.errno == ENOTDIR {
                    forget(below: path, in: &state.listings, including: true)
                } else {
                    let failure = DirectoryWatcherError(error, path: path)
                    changes.append(DirectoryChange(kind: .failed, path: path, isDirectory: true, error: failure))
                }
                continue
            }
            state.listings[path] = current
            for difference in Snapshot.differences(from: old, to: current) {
                if let change = change(for: difference, in: path, of: subscription) { changes.append(change) }
                guard subscription.recursive, difference.isDirectory else { continue }
                let child = path.appending(bytes: difference.name[...])
                switch difference.kind {
                case .removed:
                    forget(below: child, in: &state.listings, including: true)
                case .renamed:
                    if let oldName = difference.oldName {
                        rename(path.appending(bytes: oldName[...]), to: child, in: &state.listings)
                    }
                case .created:
                    addDirectory(child, to: &state.listings, for: subscription, reporting: &changes)
                default:
                    break
                }
            }
        }
        state.schedule.polled(at: now, foundChanges: !changes.isEmpty)
        subscription.loop.polled = state
        return changes
    }

    /// The change a difference in `directory` makes for a polled watcher, or nil when it does
    /// not report that kind or that entry (a file watch reports its file's name only).
    private func change(
        for difference: Snapshot.Difference, in directory: FileSystemPath, of subscription: Subscription
    ) -> DirectoryChange? {
        guard ChangeTranslation.selects(subscription.mask, difference.kind) else { return nil }
        func path(_ name: [UInt8]) -> FileSystemPath {
            if let entry = subscription.entry, directory == subscription.root, name == entry.name { return entry.path }
            return directory.appending(bytes: name[...])
        }
        if let entry = subscription.entry {
            guard difference.name == entry.name || difference.oldName == entry.name else { return nil }
        }
        return DirectoryChange(
            kind: difference.kind, path: path(difference.name), oldPath: difference.oldName.map(path),
            isDirectory: difference.isDirectory)
    }

    /// Lists a directory that appeared in a polled tree and everything below it, reporting
    /// each entry as created (as an inotify tree reports what a new directory already holds).
    private func addDirectory(
        _ directory: FileSystemPath, to listings: inout [FileSystemPath: Snapshot], for subscription: Subscription,
        reporting changes: inout [DirectoryChange]
    ) {
        if let exclusions = subscription.exclusions, exclusions.excludes(directory, under: subscription.root) {
            return
        }
        guard listings[directory] == nil, let listing = try? services.listDirectory(directory) else { return }
        listings[directory] = listing
        for (name, entry) in listing.entries.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            let isDirectory = entry.kind == .directory
            if ChangeTranslation.selects(subscription.mask, .created) {
                changes.append(
                    DirectoryChange(
                        kind: .created, path: directory.appending(bytes: name[...]), isDirectory: isDirectory))
            }
        }
        addDirectories(below: directory, listed: listing, to: &listings, for: subscription, reporting: &changes)
    }

    /// Adds the subdirectories of a listed directory of a polled tree (not following links).
    private func addDirectories(
        below directory: FileSystemPath, listed listing: Snapshot, to listings: inout [FileSystemPath: Snapshot],
        for subscription: Subscription, reporting changes: inout [DirectoryChange]
    ) {
        for (name, entry) in listing.entries where entry.kind == .directory {
            addDirectory(directory.appending(bytes: name[...]), to: &listings, for: subscription, reporting: &changes)
        }
    }

    /// Forgets the listings of `directory`'s descendants (and of itself when `including`).
    private func forget(
        below directory: FileSystemPath, in listings: inout [FileSystemPath: Snapshot], including: Bool
    ) {
        for path in listings.keys where path.isBelow(directory) || (including && path == directory) {
            listings[path] = nil
        }
    }

    /// Moves the listings of a renamed directory and its descendants to their new paths.
    private func rename(
        _ old: FileSystemPath, to new: FileSystemPath, in listings: inout [FileSystemPath: Snapshot]
    ) {
        for path in listings.keys where path == old || path.isBelow(old) {
            let moved = path == old ? new : path.replacingPrefix(old, with: new)
            listings[moved] = listings.removeValue(forKey: path)
        }
    }
}
