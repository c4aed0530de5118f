import Dispatch
import Glibc
import Synchronization

/// Trees: a recursive watcher's directories, watched before they are listed, followed through
/// renames and moves, let go when they leave (see <doc:WatchingATree> and ``WatchedTree``).
extension Router {
    /// What a tree directory's watch asks for beyond its watcher's events: every change of name
    /// (the directory's known names need them).
    static let treeBits = EventMask.names

    /// One directory of a tree to watch and list, below a node already in the tree.
    ///
    /// A level of a large tree holds a step for each of its directories until they are watched,
    /// so a step keeps no array of its own: its name is a slice of the one its siblings' names
    /// share, and its path is built when needed from its parent's, which they share too.
    struct WalkStep {
        let parent: TreeNode
        let name: ArraySlice<UInt8>
        let parentPath: FileSystemPath
        let throughLink: Bool
        /// The directory's inode as its parent's listing gave it; 0 when not listed (a directory
        /// an event brought), then read from the directory itself.
        var inode: UInt64 = 0
        /// A directory refused before (``TreeNode/refused``) tried again: refused again, it is
        /// not reported again.
        var retrying = false

        var path: FileSystemPath { parentPath.appending(bytes: name) }
    }

    /// What watching and listing one directory gave: all that can be made off the loop's
    /// thread is made where the directory was listed.
    struct Walked {
        var wd: Int32 = -1
        /// The directory's path, as the walk opened it (nil: the step's).
        var path: FileSystemPath?
        /// The directory's inode (0: unknown).
        var inode: UInt64 = 0
        /// In a fanotify tree: the directory's handle, which ``adopt`` turns into its descriptor
        /// on the loop's thread.
        var handle: KernelHandle?
        var failure: SyscallError?
        /// The watch was added; the failure, if any, is the listing's.
        var isWatched = false
        /// The directory as listed.
        var known: KnownDirectory?
        /// The birth clock read before the listing began, the directory open meanwhile: its inode
        /// was no other directory's then, and one made later with its number is born after it.
        var listedAfter: Snapshot.Time?
        /// Every entry, when they are to be reported as created.
        var entries: [(name: [UInt8], isDirectory: Bool)] = []
        /// The directory's `.gitignore`, read with its listing when the watcher leaves out what git
        /// ignores (``Router/applyGitIgnore(_:wd:at:for:)`` leaves that out of the rest).
        var gitIgnore: [UInt8]?
        /// The directories to watch next (excludes applied), their names slices of one array.
        var subdirectories: [(name: ArraySlice<UInt8>, throughLink: Bool, inode: UInt64)] = []
    }

    /// A level of a walk with this many directories or more is watched and listed on every core;
    /// below it, on the loop's thread alone (a directory made while watching, most often).
    static let parallelWalk = 64

    /// Lists `start`'s directory (watched already) and watches each subdirectory found, then
    /// lists those, and so on, a level at a time. Each directory is watched before it is listed,
    /// so nothing made in it is missed: what was made before the watch, the listing shows; what
    /// was made after, the kernel reports, and a name the listing showed already is recognised
    /// as a repeat by the directory's known names (``KnownDirectory/apply(_:at:)``). With
    /// `reporting` (a directory that appeared while watching), what the listings find is
    /// reported as created.
    ///
    /// The system calls of a large level (``parallelWalk``) run on every core: no event is read
    /// meanwhile (this runs as one of the loop's tasks, or while it routes an event), so the
    /// descriptors they return are all in the table before any event about them is routed.
    func populate(
        _ start: TreeNode, of tree: WatchedTree, for subscription: Subscription, reporting: Bool, foundByRescan: Bool
    ) {
        var first = Walked(wd: start.wd, isWatched: true)
        do {
            let fd = try table.system.openDirectory(start.path)
            defer { table.system.close(fd) }
            list(fd, at: start.path, into: &first, for: subscription, reporting: reporting)
        } catch {
            first.failure = error
        }
        let level = integrate(
            first, at: start, path: start.path, of: tree, for: subscription, reporting: reporting,
            foundByRescan: foundByRescan)
        populate(level, of: tree, for: subscription, reporting: reporting, foundByRescan: foundByRescan)
    }

    /// Watches and lists the directories of `level`, then those found in them, and so on.
    func populate(
        _ level: [WalkStep], of tree: WatchedTree, for subscription: Subscription, reporting: Bool,
        foundByRescan: Bool
    ) {
        var level = level
        while !level.isEmpty {
            var next: [WalkStep] = []
            walk(level, for: subscription, reporting: reporting) { step, result in
                guard
                    let node = adopt(
                        step, result, of: tree, for: subscription, reporting: reporting, foundByRescan: foundByRescan)
                else { return }
                next += integrate(
                    result, at: node, path: result.path ?? step.path, of: tree, for: subscription,
                    reporting: reporting, foundByRescan: foundByRescan)
            }
            level = next
        }
    }

    /// Watches and lists each directory of a level, and hands each result to `record` on this
    /// thread, in the level's order. A large level is walked on every core: the other cores'
    /// threads take its directories in turn, and this thread records each result as soon as it
    /// is ready, walking the next directory itself whenever it would otherwise wait.
    func walk(
        _ level: [WalkStep], for subscription: Subscription, reporting: Bool, record: (WalkStep, Walked) -> Void
    ) {
        let one = walker(for: subscription, reporting: reporting)
        guard level.count >= Self.parallelWalk else {
            for step in level { record(step, one(step)) }
            return
        }
        let work = LevelWalk(level, one)
        let helpers = DispatchGroup()
        for _ in 0..<max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) - 1) {
            DispatchQueue.global().async(group: helpers) { work.walkAll() }
        }
        for index in level.indices { record(level[index], work.result(index)) }
        helpers.wait()
    }

    /// Watches and lists one directory: its system calls alone, touching no state of the
    /// router, so it may run on any thread.
    ///
    /// The directory is opened first, then watched through that descriptor, then listed through
    /// it: the watch and the listing are of one directory even when it is renamed meanwhile (by
    /// path, a rename between the watch and the listing left the directory watched and never
    /// listed, and what had been made in it before its watch was lost).
    func walker(for subscription: Subscription, reporting: Bool) -> (WalkStep) -> Walked {
        let table = self.table
        let mask = subscription.mask
        let follows = subscription.followsLinks
        let markedFileSystem = subscription.loop.markedFileSystem
        return { step in
            let path = step.path
            var result = Walked(path: path)
            do throws(SyscallError) {
                // Not following links unless asked: a directory replaced by a link since it was
                // listed is refused (ELOOP) rather than followed out of the tree.
                let fd = try table.system.openDirectory(path, followingLinks: follows || step.throughLink)
                defer { table.system.close(fd) }
                if let markedFileSystem {
                    // The file system's mark sees it already: its handle is all it needs.
                    result.handle = try table.system.fileHandle(in: fd, name: nil, fileSystemID: markedFileSystem)
                } else {
                    result.wd = try table.backend.watch(openDirectory: fd, events: mask | Self.treeBits)
                }
                result.isWatched = true
                result.inode = step.inode
                if result.inode == 0, !step.throughLink {
                    result.inode = (try? table.system.entryStatus(in: fd, name: [UInt8(ascii: ".")]))??.inode ?? 0
                }
                self.list(fd, at: path, into: &result, for: subscription, reporting: reporting)
            } catch {
                result.failure = error
            }
            return result
        }
    }

    /// Lists the directory open as `fd` (found at `path`) into `result`. Touches no state of the
    /// router: it may run on any thread.
    func list(
        _ fd: Int32, at path: FileSystemPath, into result: inout Walked, for subscription: Subscription,
        reporting: Bool
    ) {
        let begun = services.birthClock()
        var listing: [(name: [UInt8], inode: UInt64, isDirectory: Bool)] = []
        // The subdirectories' names end to end, and where each is: their steps share the array.
        var names: [UInt8] = []
        var subdirectories: [(end: Int, throughLink: Bool, inode: UInt64)] = []
        let follows = subscription.followsLinks
        do {
            try Snapshot.readNames(directory: fd, system: table.system) { name, inode, kind in
                listing.append((Array(name), inode, kind == .directory))
                let isLink = follows && kind == .symbolicLink
                guard kind == .directory || isLink else { return }
                if let exclusions = subscription.exclusions,
                    exclusions.excludes(path.appending(bytes: name), under: subscription.root)
                {
                    return
                }
                names += name
                subdirectories.append((names.count, isLink, isLink ? 0 : inode))
            }
        } catch {
            result.failure = error
            return
        }
        if subscription.gitIgnores != nil,
            listing.contains(where: { !$0.isDirectory && $0.name == Self.gitIgnoreName })
        {
            result.gitIgnore = (try? table.system.readFile(named: Self.gitIgnoreName, in: fd)) ?? nil
        }
        result.known = KnownDirectory(listing: listing, listedAfter: begun, at: services.wallClock())
        result.listedAfter = begun
        var start = 0
        result.subdirectories = subdirectories.map { subdirectory in
            defer { start = subdirectory.end }
            return (names[start..<subdirectory.end], subdirectory.throughLink, subdirectory.inode)
        }
        if reporting { result.entries = listing.map { ($0.name, $0.isDirectory) } }
    }

    /// The node of a directory the walk watched, new in the tree; nil when there is nothing more
    /// to do for it: it could not be watched, or its descriptor is in the tree already. Reached by
    /// its own name, such a directory moved while its events were lost (a rescan found it here):
    /// its node moves. Reached through a link, it stays where it was reached first (a loop, or a
    /// second link to it).
    func adopt(
        _ step: WalkStep, _ walked: Walked, of tree: WatchedTree, for subscription: Subscription, reporting: Bool,
        foundByRescan: Bool
    ) -> TreeNode? {
        var result = walked
        if let handle = result.handle { result.wd = marked.descriptor(for: handle) }
        guard result.isWatched else {
            // A link that leads nowhere, or to a file, is no directory to watch.
            guard let failure = result.failure, !step.throughLink else { return nil }
            if failure.errno == ENOENT || failure.errno == ENOTDIR {
                // Removed since it was listed, or an ancestor renamed (or exchanged with a file,
                // ENOTDIR): then the rename's event is still to come, and the directory is tried
                // again at its new path after it.
                tree.unreached.append((step.parent, Array(step.name), reporting, foundByRescan))
            }
            if failure.errno == EACCES || failure.errno == EPERM {
                // Tried again when its attributes change; still refused, it was said already.
                step.parent.refused.insert(Array(step.name))
                if step.retrying { return nil }
            }
            treeFailed(failure, at: result.path ?? step.path, for: subscription)
            return nil
        }
        if !step.parent.refused.isEmpty { step.parent.refused.remove(Array(step.name)) }
        let path = result.path ?? step.path
        if let existing = tree.node(result.wd) {
            table.insert(subscription, wd: result.wd, directory: path, mask: subscription.mask, node: existing)
            if !step.throughLink, !existing.isRoot, !step.parent.isInside(existing) {
                // What its old name holds now is another entry, found as such when the old
                // parent is listed (a directory exchanged across directories while the events
                // were lost), not the same directory by its name.
                // (The walk read its inode: the same directory, by its descriptor or handle.)
                if existing.inode == 0 { existing.inode = result.inode }
                if let parent = existing.parent {
                    known[parent.wd]?.vouch(existing.name[...], directoryInode: existing.inode)
                }
                // Met by a walk while watching: the event that moved it here is still to come.
                existing.metEarlyIn = foundByRescan ? -1 : existing.parent?.wd ?? -1
                if existing.metEarlyIn != -1 { tree.metEarlyNames[existing.wd] = existing.name }
                tree.move(existing, to: step.name, in: step.parent)
                // Reported as created with its parent's entries, it is news to the watcher here,
                // and so is what it holds: its move's events were lost, or are still to come
                // (a move out, which lets its old path go; a rename over this path).
                if reporting { reportContents(of: existing, for: subscription, foundByRescan: foundByRescan) }
                // Directories below it that a walk could not reach at its old path are reached now.
                retryUnreached(in: tree, for: subscription)
            }
            return nil
        }
        let node = tree.add(step.name, of: step.parent, wd: result.wd)
        node.inode = result.inode
        // Brought by an event, its parent knows it by name alone: by its inode from now on, with
        // the listing's birth bound (removed while events are lost, its number may be reused).
        if step.inode == 0, let begun = result.listedAfter {
            known[step.parent.wd]?.vouch(step.name, directoryInode: result.inode, bornBy: begun.justBefore)
        }
        table.insert(subscription, wd: result.wd, directory: path, mask: subscription.mask, node: node)
        return node
    }

    /// Reports what a directory of the tree met again at a new path holds, as created: what the
    /// watcher knows of it and of each directory below it, parents first.
    func reportContents(of node: TreeNode, for subscription: Subscription, foundByRescan: Bool) {
        guard subscription.mask & EventMask.create != 0 else { return }
        var stack = [node]
        // What git's rules let in at the new path and did not at the old: walked after.
        var newlyLetIn: [(parent: TreeNode, name: [UInt8])] = []
        while let next = stack.popLast() {
            next.contentsOwed = false
            let path = next.path
            var entries: [(name: [UInt8], isDirectory: Bool)] = []
            if let kept = known.entries(next.wd) {
                kept.forEach { name, known in entries.append((Array(name), known.isDirectory)) }
            } else {
                try? services.listNames(path) { name, _, kind in entries.append((Array(name), kind == .directory)) }
            }
            for entry in entries {
                collect(
                    DirectoryChange(
                        kind: .created, path: path.appending(bytes: entry.name[...]), isDirectory: entry.isDirectory,
                        foundByRescan: foundByRescan),
                    for: subscription)
            }
            guard subscription.gitIgnores != nil, let tree = subscription.loop.tree else {
                stack += next.children
                continue
            }
            // Under the rules of its new path, a directory git ignores now is let go, and one it
            // ignored at the old path is watched.
            for child in Array(next.children) {
                if gitIgnores(child.path, isDirectory: true, for: subscription) {
                    for wd in tree.remove(child) { release(wd, for: subscription) }
                } else {
                    stack.append(child)
                }
            }
            for entry in entries where entry.isDirectory && next.child(entry.name[...]) == nil {
                let entryPath = path.appending(bytes: entry.name[...])
                if !gitIgnores(entryPath, isDirectory: true, for: subscription),
                    !(subscription.exclusions?.excludes(entryPath, under: subscription.root) ?? false)
                {
                    newlyLetIn.append((next, entry.name))
                }
            }
        }
        for (parent, name) in newlyLetIn {
            treeChanged(name[...], at: parent, appeared: true, for: subscription, foundByRescan: foundByRescan)
        }
    }

    /// Records what the listing of `node`'s directory found, reports it when `reporting`, and
    /// returns the subdirectories to watch next.
    func integrate(
        _ walked: Walked, at node: TreeNode, path: FileSystemPath, of tree: WatchedTree,
        for subscription: Subscription, reporting: Bool, foundByRescan: Bool
    ) -> [WalkStep] {
        var result = walked
        if subscription.gitIgnores != nil, result.known != nil {
            applyGitIgnore(&result, wd: node.wd, at: path, for: subscription)
        }
        guard let directory = result.known else {
            if let failure = result.failure {
                // Removed before it was listed: nothing in it was reported, so what its events
                // say left it (a directory moved on from it) comes from nowhere.
                if reporting, failure.errno == ENOENT, !known.contains(node.wd) {
                    known[node.wd] = KnownDirectory(
                        listing: [], listedAfter: services.birthClock(), at: services.wallClock())
                }
                treeFailed(failure, at: path, for: subscription)
            }
            return []
        }
        expectListingEcho(node.wd)
        if !known.contains(node.wd) { known[node.wd] = directory }
        if reporting && subscription.mask & EventMask.create != 0 {
            for entry in result.entries {
                collect(
                    DirectoryChange(
                        kind: .created, path: path.appending(bytes: entry.name[...]), isDirectory: entry.isDirectory,
                        foundByRescan: foundByRescan),
                    for: subscription)
            }
        }
        return result.subdirectories.map {
            WalkStep(parent: node, name: $0.name, parentPath: path, throughLink: $0.throughLink, inode: $0.inode)
        }
    }
}
