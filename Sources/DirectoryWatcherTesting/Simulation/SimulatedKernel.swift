import CDirectoryWatcherShims
@_spi(DirectoryWatcherTesting) import DirectoryWatcher
import Foundation
import Glibc

/// The kernel of a ``SimulatedFileSystem``: a tree held in memory, with inotify's calls over it
/// (`inotify_init1`, `inotify_add_watch`, `inotify_rm_watch`, `read` of the instance), the
/// listing calls (`open`, `getdents64`, `statx`, `close`) and the loop's barrier file, as a table
/// of ``SystemCalls`` that a real event loop runs on. epoll, eventfd and threads are the real
/// ones: the inotify descriptor is a real eventfd, readable while events are queued, so the loop
/// sleeps in `epoll_wait` and wakes for a change as it does for the kernel's.
///
/// Each change made (``mkdir(_:)``, ``create(_:)``, ``rename(_:to:)``, …) queues the events the
/// kernel would queue for it, in the kernel's order, on the watched directories only: a change in
/// a directory not watched yet is silent, which is how a tree's races are reproduced exactly. The
/// queue overflows as the kernel's does, at ``queueCapacity``. Listings read the tree as it is
/// when they run.
///
/// The project's own in-memory tests drive a router over this kernel with no loop at all; the
/// kit's ``SimulatedFileSystem`` runs a real loop over it.
final class SimulatedKernel: @unchecked Sendable {
    /// An entry of the tree.
    final class Node {
        let inode: UInt64
        let isDirectory: Bool
        var children: [[UInt8]: Node] = [:]
        weak var parent: Node?
        var name: [UInt8]
        /// Its inotify watch, if it has one (the kernel's mark on the inode).
        var wd: Int32?
        var size: Int64 = 0
        var modified: Int64
        var changed: Int64
        let born: Int64
        var permissions: UInt32
        /// The error a watch of this directory fails with (``refuseWatches(of:errno:)``).
        var watchRefusal: Int32?

        init(inode: UInt64, isDirectory: Bool, name: [UInt8], time: Int64) {
            self.inode = inode
            self.isDirectory = isDirectory
            self.name = name
            self.modified = time
            self.changed = time
            self.born = time
            self.permissions = isDirectory ? 0o755 : 0o644
        }
    }

    /// One queued inotify record.
    struct Event: Equatable {
        var wd: Int32
        var mask: UInt32
        var cookie: UInt32 = 0
        var name: [UInt8] = []
    }

    /// A directory open through `openDirectory`: its listing is taken when it is first read, as
    /// far as the buffer goes, and goes on from there.
    private struct OpenDirectory {
        let node: Node
        var listing: [(name: [UInt8], inode: UInt64, isDirectory: Bool)]?
        var position = 0
    }

    /// The watch descriptor of the loop's barrier file: events the barrier writes queue on it.
    static let barrierWD: Int32 = 999_999
    /// inotify's event bits (`IN_ALL_EVENTS`), without the flags that ask for something.
    static let eventBits: UInt32 = 0x0fff

    private let lock = NSCondition()
    private let root: Node
    private var nextInode: UInt64 = 2
    /// The file system's clock: each change advances it, and is stamped with it (modification,
    /// change and birth times, in seconds).
    private var clock: Int64 = 1
    private var watches: [Int32: (node: Node, mask: UInt32)] = [:]
    private var nextWD: Int32 = 1
    private var open: [Int32: OpenDirectory] = [:]
    private var nextFD: Int32 = 10_000
    private var events: [Event] = []
    private var overflowQueued = false
    private var nextCookie: UInt32 = 1
    /// The inotify instance: a real eventfd, signalled while events are queued. -1: none.
    private var inotifyFD: Int32 = -1
    /// The loop's barrier file (a real eventfd standing for its memfd), and whether its watch
    /// was added.
    private var barrierFD: Int32 = -1
    private var barrierWatched = false
    /// The ``losingEvents(_:)`` calls running (on any threads): while there is one, every event
    /// is lost (the queue is full) and a read finds nothing to read.
    private var losing = 0
    private var readsHeld: Bool { losing > 0 }

    private var capacity = 16_384
    private var maximumWatches = Int.max

    /// How many events the queue holds before it overflows (`max_queued_events`).
    var queueCapacity: Int {
        get { lock.withLock { capacity } }
        set { lock.withLock { capacity = newValue } }
    }

    /// How many watches may exist at once (`max_user_watches`); past it, `ENOSPC`.
    var watchLimit: Int {
        get { lock.withLock { maximumWatches } }
        set { lock.withLock { maximumWatches = newValue } }
    }

    init() {
        root = Node(inode: 1, isDirectory: true, name: [], time: 1)
    }

    // MARK: - What a test does to the tree

    /// Makes a directory (its parent must exist).
    func mkdir(_ path: String) {
        make(path, isDirectory: true)
    }

    /// Makes every missing directory of `path`, as `mkdir -p`.
    func mkdirs(_ path: String) {
        var prefix = ""
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if lock.withLock({ find(prefix) }) == nil { mkdir(prefix) }
        }
    }

    /// Makes an empty file, as `open(O_CREAT)` then `close` do.
    func create(_ path: String) {
        let node = make(path, isDirectory: false)
        lock.withLock {
            guard let parent = node.parent else { return }
            emit(parent, UInt32(IN_OPEN), name: node.name)
            emit(node, UInt32(IN_OPEN))
            emit(parent, UInt32(IN_CLOSE_WRITE), name: node.name)
            emit(node, UInt32(IN_CLOSE_WRITE))
        }
    }

    /// Writes a file and closes it: open, modify, close after writing.
    func write(_ path: String) {
        beginWriting(path)
        endWriting(path)
    }

    /// Opens a file and writes to it, leaving it open: a writer still busy.
    func beginWriting(_ path: String) {
        lock.withLock {
            let node = existing(path)
            tick()
            node.size += 1
            node.modified = clock
            node.changed = clock
            guard let parent = node.parent else { return }
            emit(parent, UInt32(IN_OPEN), name: node.name)
            emit(node, UInt32(IN_OPEN))
            emit(parent, UInt32(IN_MODIFY), name: node.name)
            emit(node, UInt32(IN_MODIFY))
        }
    }

    /// Closes a file a writer opened.
    func endWriting(_ path: String) {
        lock.withLock {
            let node = existing(path)
            guard let parent = node.parent else { return }
            emit(parent, UInt32(IN_CLOSE_WRITE), name: node.name)
            emit(node, UInt32(IN_CLOSE_WRITE))
        }
    }

    /// Changes an entry's permissions (a directory with no read permission cannot be opened).
    func chmod(_ path: String, _ permissions: UInt32) {
        lock.withLock {
            let node = existing(path)
            tick()
            node.permissions = permissions
            node.changed = clock
            if let parent = node.parent { emit(parent, UInt32(IN_ATTRIB) | isDirectoryBit(node), name: node.name) }
            emit(node, UInt32(IN_ATTRIB))
        }
    }

    /// Removes an entry, and what a directory holds first, as `rm -r` does.
    func remove(_ path: String) {
        lock.withLock { remove(existing(path)) }
    }

    /// Renames an entry (an existing file at the destination is replaced, as `rename(2)` does).
    /// A move to or from a directory not watched queues one half only, as the kernel's does.
    func rename(_ from: String, to: String) {
        lock.withLock {
            let node = existing(from)
            let (parent, name) = parentAndName(to)
            precondition(parent.isDirectory, "\(to): the parent is no directory")
            if let replaced = parent.children[name] {
                precondition(!replaced.isDirectory && !node.isDirectory, "\(to): only a file replaces a file")
                replaced.parent = nil
                if let wd = replaced.wd { endWatch(wd, selfMask: UInt32(IN_DELETE_SELF)) }
            }
            precondition(!isInside(parent, node), "\(to) is inside \(from)")
            let oldParent = node.parent!
            let oldName = node.name
            let cookie = nextCookie
            nextCookie += 1
            tick()
            oldParent.children[oldName] = nil
            node.name = name
            node.parent = parent
            node.changed = clock
            parent.children[name] = node
            emit(oldParent, UInt32(IN_MOVED_FROM) | isDirectoryBit(node), cookie: cookie, name: oldName)
            emit(parent, UInt32(IN_MOVED_TO) | isDirectoryBit(node), cookie: cookie, name: name)
            emit(node, UInt32(IN_MOVE_SELF))
        }
    }

    /// From now on, a watch of the directory at `path` fails with `code`, as the kernel's fails
    /// for a directory the process may not read (`EACCES`) or past the watch limit (`ENOSPC`).
    func refuseWatches(of path: String, errno code: Int32?) {
        lock.withLock { existing(path).watchRefusal = code }
    }

    /// Runs `body` while the queue is full: the changes it makes queue no event, and one
    /// overflow event is queued in their place, as the kernel does when its reader falls behind.
    /// The reader finds nothing to read until `body` is done, so every change of it is lost.
    func losingEvents(_ body: () -> Void) {
        lock.withLock {
            if losing == 0 { events.append(Event(wd: -1, mask: UInt32(IN_Q_OVERFLOW))) }
            losing += 1
        }
        body()
        lock.withLock {
            losing -= 1
            if losing == 0 {
                signal()
                lock.broadcast()
            }
        }
    }

    /// Whether an entry is there.
    func exists(_ path: String) -> Bool { lock.withLock { find(path) != nil } }

    /// Whether the entry at `path` is a directory; nil when there is none.
    func isDirectory(_ path: String) -> Bool? { lock.withLock { find(path)?.isDirectory } }

    /// Every entry below `directory`: relative path to whether it is a directory.
    func tree(_ directory: String) -> [String: Bool] {
        lock.withLock {
            var found: [String: Bool] = [:]
            func visit(_ node: Node, _ prefix: String) {
                for (name, child) in node.children {
                    let path =
                        prefix.isEmpty
                        ? String(decoding: name, as: UTF8.self) : prefix + "/" + String(decoding: name, as: UTF8.self)
                    found[path] = child.isDirectory
                    if child.isDirectory { visit(child, path) }
                }
            }
            if let start = find(directory) { visit(start, "") }
            return found
        }
    }

    // MARK: - The queue

    /// The events queued and not read yet.
    var queued: Int { lock.withLock { events.count } }

    /// Takes up to `limit` queued events, as a read does.
    func take(upTo limit: Int = .max) -> [Event] {
        lock.withLock {
            let taken = Array(events.prefix(limit))
            removeRead(taken.count)
            return taken
        }
    }

    /// Queues the event of a barrier write: the loop's own file, touched.
    func touchBarrier() {
        lock.withLock { enqueue(Event(wd: Self.barrierWD, mask: UInt32(IN_ATTRIB))) }
    }

    /// Wakes the reader with nothing queued, as time passing does (the loop's deadlines).
    func wakeReader() {
        lock.withLock { signal() }
    }

    /// Returns once the reader has taken every event queued (none is left to read, or there is
    /// no reader), so that what it read was routed at the time it was read.
    func waitUntilRead() {
        lock.withLock {
            while !events.isEmpty && inotifyFD >= 0 && !readsHeld { lock.wait() }
        }
    }

    /// The directories watched now, by path.
    var watchedPaths: [String] {
        lock.withLock { watches.values.map { path(of: $0.node) ?? "(unlinked)" }.sorted() }
    }

    /// Descriptors opened and not closed: a leak when a test ends with any.
    var openDescriptors: Int { lock.withLock { open.count } }

    /// A tick of the file system's clock, read: time passes at each reading, so an entry born
    /// before a reading is older than it, as it is once the kernel's coarse clock has ticked.
    func clockReading() -> Int64 {
        lock.withLock {
            tick()
            return clock
        }
    }

    /// Watches the directory at `path` (or a `/proc/self/fd/N` link to one open) for `mask`:
    /// its watch descriptor, or an error number.
    func addWatch(_ path: String, mask: UInt32) -> Result<Int32, Errno> {
        lock.withLock { addWatch(find(path), orFailureOf: path, mask & Self.eventBits) }
    }

    /// Stops a watch: false when there is none by that number.
    @discardableResult
    func removeWatch(_ wd: Int32) -> Bool {
        lock.withLock { removeWatchLocked(wd) }
    }

    /// An error number, as a `Result`'s failure.
    struct Errno: Error, Equatable {
        let code: Int32
    }

    // MARK: - The system calls

    /// The system-call table over this kernel: inotify's and the listing's calls answered here,
    /// epoll, eventfd, threads and the rest passed to `base`.
    func calls(over base: SystemCalls = .live) -> SystemCalls {
        var calls = base
        calls.inotifyInit1 = { [self] _ in lock.withLock { initInotify(base) } }
        calls.inotifyAddWatch = { [self] fd, path, mask in
            lock.withLock {
                guard fd == inotifyFD, fd >= 0 else { return fail(EBADF) }
                let path = String(cString: path)
                if barrierFD >= 0, path == "/proc/self/fd/\(barrierFD)" {
                    barrierWatched = true
                    return Self.barrierWD
                }
                switch addWatch(find(path), orFailureOf: path, mask & Self.eventBits) {
                case .success(let wd): return wd
                case .failure(let error): return fail(error.code)
                }
            }
        }
        calls.inotifyRmWatch = { [self] fd, wd in
            lock.withLock {
                guard fd == inotifyFD, fd >= 0 else { return fail(EBADF) }
                return removeWatchLocked(wd) ? 0 : fail(EINVAL)
            }
        }
        calls.memfdCreate = { [self] _ in
            lock.withLock {
                let fd = base.eventfd(0, Int32(EFD_CLOEXEC))
                if fd >= 0 { barrierFD = fd }
                return fd
            }
        }
        calls.futimens = { [self] fd, times in
            let isBarrier = lock.withLock { () -> Bool in
                guard fd == barrierFD, fd >= 0 else { return false }
                if barrierWatched { enqueue(Event(wd: Self.barrierWD, mask: UInt32(IN_ATTRIB))) }
                return true
            }
            return isBarrier ? 0 : base.futimens(fd, times)
        }
        calls.read = { [self] fd, buffer, count in
            let answer = lock.withLock { () -> Int? in
                guard fd == inotifyFD, fd >= 0 else { return nil }
                return readEvents(into: buffer, count: count)
            }
            return answer ?? base.read(fd, buffer, count)
        }
        calls.close = { [self] fd in
            let answer = lock.withLock { () -> Int32? in
                if open.removeValue(forKey: fd) != nil { return 0 }
                if fd == inotifyFD, fd >= 0 {
                    for wd in watches.keys { watches[wd]?.node.wd = nil }
                    watches = [:]
                    events = []
                    inotifyFD = -1
                    lock.broadcast()
                } else if fd == barrierFD, fd >= 0 {
                    barrierFD = -1
                    barrierWatched = false
                }
                return nil
            }
            return answer ?? base.close(fd)
        }
        calls.openDirectory = { [self] path, _ in lock.withLock { openDirectory(String(cString: path)) } }
        calls.openDirectoryAt = { [self] directory, path, _ in
            lock.withLock { openDirectory(String(cString: path), relativeTo: directory) }
        }
        calls.getdents64 = { [self] fd, buffer, count in lock.withLock { list(fd, into: buffer, count: count) } }
        calls.entryStatus = { [self] directory, name, status in
            lock.withLock { self.status(of: String(cString: name), in: directory, into: status) }
        }
        calls.openFile = { _ in fail(ENOENT) }
        calls.getcwd = { buffer, size in
            guard size >= 2 else {
                errno = ERANGE
                return nil
            }
            buffer[0] = CChar(UInt8(ascii: "/"))
            buffer[1] = 0
            return buffer
        }
        // No symbolic links in the simulation: every name is a link to nothing.
        calls.readlink = { [self] path, _, _ in
            lock.withLock { find(String(cString: path)) == nil ? fail(ENOENT) : fail(EINVAL) }
        }
        // tmpfs's number: a local file system, watched through inotify.
        calls.fileSystemType = { [self] path in
            lock.withLock { find(String(cString: path)) == nil ? Int64(fail(ENOENT) as Int32) : 0x0102_1994 }
        }
        // fanotify needs a real file system: refused, as for a process without the capability.
        calls.fanotifyInit = { fail(EPERM) }
        calls.fanotifyMarkFileSystem = { _, _, _, _ in fail(EPERM) }
        calls.nameToHandle = { _, _, _, _, _ in fail(EOPNOTSUPP) }
        calls.openByHandle = { _, _, _, _ in fail(EPERM) }
        return calls
    }

    // MARK: - Inside (with the lock held)

    private func initInotify(_ base: SystemCalls) -> Int32 {
        guard inotifyFD < 0 else { return fail(EMFILE) }
        let fd = base.eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        if fd >= 0 {
            inotifyFD = fd
            if !events.isEmpty { signal() }
        }
        return fd
    }

    /// Makes the inotify descriptor readable (a no-op without one).
    private func signal() {
        guard inotifyFD >= 0 else { return }
        var one: UInt64 = 1
        _ = Glibc.write(inotifyFD, &one, 8)
    }

    /// Empties the eventfd's counter: nothing is left to read.
    private func unsignal() {
        guard inotifyFD >= 0 else { return }
        var count: UInt64 = 0
        _ = Glibc.read(inotifyFD, &count, 8)
    }

    /// `read` of the inotify descriptor: as many whole records as fit, `EAGAIN` when none is
    /// queued, `EINVAL` when the first does not fit.
    private func readEvents(into buffer: UnsafeMutableRawPointer, count: Int) -> Int {
        if readsHeld || events.isEmpty {
            unsignal()
            return fail(EAGAIN)
        }
        var written = 0
        var taken = 0
        for event in events {
            // The kernel pads a name with NULs to a multiple of the header's 16 bytes.
            let length = event.name.isEmpty ? 0 : (event.name.count + 1 + 15) & ~15
            let size = 16 + length
            if written + size > count {
                if taken == 0 { return fail(EINVAL) }
                break
            }
            let record = UnsafeMutableRawBufferPointer(start: buffer + written, count: size)
            record.initializeMemory(as: UInt8.self, repeating: 0)
            record.storeBytes(of: event.wd, toByteOffset: 0, as: Int32.self)
            record.storeBytes(of: event.mask, toByteOffset: 4, as: UInt32.self)
            record.storeBytes(of: event.cookie, toByteOffset: 8, as: UInt32.self)
            record.storeBytes(of: UInt32(length), toByteOffset: 12, as: UInt32.self)
            for (offset, byte) in event.name.enumerated() { record[16 + offset] = byte }
            written += size
            taken += 1
        }
        removeRead(taken)
        return written
    }

    /// Takes the first `count` events off the queue, as a read does: the queue has room again
    /// (an overflow may be queued anew), and once it is empty the descriptor is not readable and
    /// ``waitUntilRead()`` returns.
    private func removeRead(_ count: Int) {
        events.removeFirst(count)
        if events.count < capacity { overflowQueued = false }
        if events.isEmpty {
            unsignal()
            lock.broadcast()
        }
    }

    @discardableResult
    private func make(_ path: String, isDirectory: Bool) -> Node {
        lock.withLock {
            let (parent, name) = parentAndName(path)
            precondition(parent.isDirectory, "\(path): the parent is no directory")
            precondition(parent.children[name] == nil, "\(path) exists")
            tick()
            let node = Node(inode: nextInode, isDirectory: isDirectory, name: name, time: clock)
            nextInode += 1
            node.parent = parent
            parent.children[name] = node
            parent.modified = clock
            emit(parent, UInt32(IN_CREATE) | isDirectoryBit(node), name: name)
            return node
        }
    }

    private func remove(_ node: Node) {
        for child in node.children.values.sorted(by: { $0.name.lexicographicallyPrecedes($1.name) }) {
            remove(child)
        }
        guard let parent = node.parent else { return }
        tick()
        parent.children[node.name] = nil
        node.parent = nil
        if let wd = node.wd { endWatch(wd, selfMask: UInt32(IN_DELETE_SELF)) }
        emit(parent, UInt32(IN_DELETE) | isDirectoryBit(node), name: node.name)
    }

    /// The kernel's end of a watch whose inode is gone: its own event, then `IN_IGNORED`.
    private func endWatch(_ wd: Int32, selfMask: UInt32) {
        guard let watch = watches[wd] else { return }
        emit(watch.node, selfMask)
        enqueue(Event(wd: wd, mask: UInt32(IN_IGNORED)))
        watch.node.wd = nil
        watches[wd] = nil
    }

    private func tick() { clock += 1 }

    private func isDirectoryBit(_ node: Node) -> UInt32 { node.isDirectory ? UInt32(IN_ISDIR) : 0 }

    /// Queues an event on `node`'s watch, if it has one that asked for it.
    private func emit(_ node: Node, _ mask: UInt32, cookie: UInt32 = 0, name: [UInt8] = []) {
        guard let wd = node.wd, let watch = watches[wd] else { return }
        let kind = mask & ~UInt32(IN_ISDIR)
        let always = UInt32(IN_IGNORED) | UInt32(IN_UNMOUNT)
        guard kind & (watch.mask | always) != 0 else { return }
        enqueue(Event(wd: wd, mask: mask, cookie: cookie, name: name))
    }

    /// Adds an event to the queue, as the kernel does: an event like the last one queued is
    /// merged into it, and a full queue takes one overflow event and drops the rest.
    private func enqueue(_ event: Event) {
        if overflowQueued || losing > 0 { return }
        if events.count >= capacity {
            events.append(Event(wd: -1, mask: UInt32(IN_Q_OVERFLOW)))
            overflowQueued = true
            signal()
            return
        }
        if events.last == event { return }
        events.append(event)
        if !readsHeld { signal() }
    }

    private func components(_ path: String) -> [[UInt8]] {
        path.split(separator: "/").map { Array($0.utf8) }
    }

    /// The node at `path`, or at a `/proc/self/fd/N` link to an open directory.
    private func find(_ path: String) -> Node? {
        if path.hasPrefix("/proc/self/fd/") {
            return Int32(path.dropFirst("/proc/self/fd/".count)).flatMap { open[$0]?.node }
        }
        return find(components(path), from: root)
    }

    private func find(_ components: [[UInt8]], from start: Node) -> Node? {
        var node = start
        for component in components {
            if component == Array(".".utf8) { continue }
            if component == Array("..".utf8) {
                node = node.parent ?? node
                continue
            }
            guard node.isDirectory, let child = node.children[component] else { return nil }
            node = child
        }
        return node
    }

    private func existing(_ path: String) -> Node {
        guard let node = find(path) else { preconditionFailure("\(path) does not exist") }
        return node
    }

    private func parentAndName(_ path: String) -> (Node, [UInt8]) {
        var parts = components(path)
        precondition(!parts.isEmpty, "\(path) names the root")
        let name = parts.removeLast()
        guard let parent = find(parts, from: root) else { preconditionFailure("\(path): no parent") }
        return (parent, name)
    }

    private func isInside(_ node: Node, _ ancestor: Node) -> Bool {
        var current: Node? = node
        while let next = current {
            if next === ancestor { return true }
            current = next.parent
        }
        return false
    }

    private func path(of node: Node) -> String? {
        var names: [String] = []
        var current = node
        while let parent = current.parent {
            names.append(String(decoding: current.name, as: UTF8.self))
            current = parent
        }
        guard current === root else { return nil }
        return "/" + names.reversed().joined(separator: "/")
    }

    /// Why `path` cannot be reached as a directory: `ENOENT`, or `ENOTDIR` for a file on the way.
    private func lookUpFailure(_ path: String) -> Int32 {
        var node = root
        for component in components(path) {
            guard node.isDirectory else { return ENOTDIR }
            guard let child = node.children[component] else { return ENOENT }
            node = child
        }
        return node.isDirectory ? 0 : ENOTDIR
    }

    /// A watch of `node` (nil: `path` names no directory), as a directory watch of inotify's
    /// is: one descriptor per directory, its events added to.
    private func addWatch(_ node: Node?, orFailureOf path: String, _ mask: UInt32) -> Result<Int32, Errno> {
        guard let node else {
            return .failure(Errno(code: path.hasPrefix("/proc/") ? ENOENT : lookUpFailure(path)))
        }
        guard node.isDirectory else { return .failure(Errno(code: ENOTDIR)) }
        if let refusal = node.watchRefusal { return .failure(Errno(code: refusal)) }
        if let wd = node.wd, let watch = watches[wd] {
            watches[wd] = (node, watch.mask | mask)
            return .success(wd)
        }
        guard watches.count < maximumWatches else { return .failure(Errno(code: ENOSPC)) }
        let wd = nextWD
        nextWD += 1
        watches[wd] = (node, mask)
        node.wd = wd
        return .success(wd)
    }

    private func removeWatchLocked(_ wd: Int32) -> Bool {
        guard let watch = watches.removeValue(forKey: wd) else { return false }
        watch.node.wd = nil
        enqueue(Event(wd: wd, mask: UInt32(IN_IGNORED)))
        return true
    }

    private func openDirectory(_ path: String, relativeTo directory: Int32? = nil) -> Int32 {
        let node: Node?
        if let directory, directory != AT_FDCWD, !path.hasPrefix("/") {
            guard let start = open[directory]?.node else { return fail(EBADF) }
            node = find(components(path), from: start)
        } else {
            node = find(path)
        }
        guard let node else { return fail(path.hasPrefix("/proc/") ? ENOENT : lookUpFailure(path)) }
        guard node.isDirectory else { return fail(ENOTDIR) }
        // As for a process that is not root: no read permission, no listing.
        guard node.permissions & 0o444 != 0 else { return fail(EACCES) }
        let fd = nextFD
        nextFD += 1
        open[fd] = OpenDirectory(node: node)
        return fd
    }

    /// `getdents64`: as many `linux_dirent64` records as fit, each padded to 8 bytes.
    private func list(_ fd: Int32, into buffer: UnsafeMutableRawPointer, count: Int) -> Int {
        guard var directory = open[fd] else { return fail(EBADF) }
        if directory.listing == nil {
            directory.listing = directory.node.children.values
                .sorted { $0.name.lexicographicallyPrecedes($1.name) }
                .map { ($0.name, $0.inode, $0.isDirectory) }
        }
        // linux_dirent64: inode, offset, record length, type, then the name and its NUL.
        let headerSize = 19
        var written = 0
        while let listing = directory.listing, directory.position < listing.count {
            let entry = listing[directory.position]
            let length = (headerSize + entry.name.count + 1 + 7) & ~7
            if written + length > count {
                if written == 0 { return fail(EINVAL) }
                break
            }
            let record = UnsafeMutableRawBufferPointer(start: buffer + written, count: length)
            record.initializeMemory(as: UInt8.self, repeating: 0)
            record.storeBytes(of: entry.inode, toByteOffset: 0, as: UInt64.self)
            record.storeBytes(of: Int64(directory.position + 1), toByteOffset: 8, as: Int64.self)
            record.storeBytes(of: UInt16(length), toByteOffset: 16, as: UInt16.self)
            record.storeBytes(of: UInt8(entry.isDirectory ? DT_DIR : DT_REG), toByteOffset: 18, as: UInt8.self)
            for (offset, byte) in entry.name.enumerated() { record[headerSize + offset] = byte }
            written += length
            directory.position += 1
        }
        open[fd] = directory
        return written
    }

    /// `statx` of `name` in the open directory `directory` (or an absolute name).
    private func status(of name: String, in directory: Int32, into status: UnsafeMutablePointer<cdw_entry_status>)
        -> Int32
    {
        let node: Node?
        if name.hasPrefix("/") {
            node = find(name)
        } else {
            guard let start = open[directory]?.node else { return fail(EBADF) }
            node = find(components(name), from: start)
        }
        guard let node else { return fail(ENOENT) }
        var result = cdw_entry_status()
        result.mask = 0x800 | 0x7ff  // STATX_BTIME | STATX_BASIC_STATS
        result.mode = (node.isDirectory ? 0o040000 : 0o100000) | node.permissions
        result.device = 1
        result.inode = node.inode
        result.size = node.size
        result.modified_seconds = node.modified
        result.changed_seconds = node.changed
        result.born_seconds = node.born
        status.pointee = result
        return 0
    }
}

/// A system call's failure: -1 with `errno` set.
private func fail<Result: SignedInteger>(_ code: Int32) -> Result {
    errno = code
    return -1
}
