import CDirectoryWatcherShims
import Foundation
import Glibc

@testable import DirectoryWatcher

/// The in-memory backend: a file system held in memory, whose directories are watched through
/// ``DirectoryWatchBackend`` as inotify's are (one descriptor per directory, its events queued
/// in the kernel's order), and listed through the library's system-call table (``SystemCalls``:
/// `open`, `getdents64`, `statx`, `close`): what the router runs against in the in-memory tests,
/// with no kernel and no thread.
///
/// Each change a test makes (``mkdir(_:)``, ``create(_:)``, ``rename(_:to:)``, …) queues the
/// events the kernel would queue for it, in the kernel's order, on the watched directories only:
/// a change in a directory not watched yet is silent, which is how a tree's races (a directory
/// made and filled before its watch) are reproduced exactly. The queue overflows as the kernel's
/// does, at ``queueCapacity``. Listings (`getdents64`, `statx`) read the tree as it is when they
/// run, so a change made between two events is seen by a listing made in between.
///
/// Every other system call fails with `ENOSYS`: a test that reaches the kernel is a test that
/// does not run in memory.
final class MemoryFileSystem: @unchecked Sendable {
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

    /// A directory open through ``SystemCalls/openDirectory``: its listing is taken when it is
    /// first read, as far as the buffer goes, and goes on from there.
    private struct OpenDirectory {
        let node: Node
        var listing: [(name: [UInt8], inode: UInt64, isDirectory: Bool)]?
        var position = 0
    }

    /// The watch descriptor of the loop's barrier file: events the barrier writes queue on it.
    static let barrierWD: Int32 = 999_999

    private let lock = NSLock()
    private let root: Node
    private var nextInode: UInt64 = 2
    /// The file system's clock: each change advances it, and is stamped with it (modification,
    /// change and birth times, in seconds).
    private var clock: Int64 = 1
    private var watches: [Int32: (node: Node, mask: UInt32)] = [:]
    private var nextWD: Int32 = 1
    private var open: [Int32: OpenDirectory] = [:]
    private var nextFD: Int32 = 10_000
    private var events: [BackendEvent] = []
    private var overflowQueued = false
    private var nextCookie: UInt32 = 1

    /// How many events the queue holds before it overflows (`max_queued_events`).
    var queueCapacity = 16_384
    /// How many watches may exist at once (`max_user_watches`); past it, `ENOSPC`.
    var watchLimit = Int.max

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
            emit(parent, EventMask.open, name: node.name)
            emit(node, EventMask.open)
            emit(parent, EventMask.closeWrite, name: node.name)
            emit(node, EventMask.closeWrite)
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
            emit(parent, EventMask.open, name: node.name)
            emit(node, EventMask.open)
            emit(parent, EventMask.modify, name: node.name)
            emit(node, EventMask.modify)
        }
    }

    /// Closes a file a writer opened.
    func endWriting(_ path: String) {
        lock.withLock {
            let node = existing(path)
            guard let parent = node.parent else { return }
            emit(parent, EventMask.closeWrite, name: node.name)
            emit(node, EventMask.closeWrite)
        }
    }

    /// Changes an entry's permissions (a directory with no read permission cannot be opened).
    func chmod(_ path: String, _ permissions: UInt32) {
        lock.withLock {
            let node = existing(path)
            tick()
            node.permissions = permissions
            node.changed = clock
            if let parent = node.parent { emit(parent, EventMask.attributes | isDirectoryBit(node), name: node.name) }
            emit(node, EventMask.attributes)
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
                if let wd = replaced.wd { endWatch(wd, selfMask: EventMask.deleteSelf) }
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
            emit(oldParent, EventMask.movedFrom | isDirectoryBit(node), cookie: cookie, name: oldName)
            emit(parent, EventMask.movedTo | isDirectoryBit(node), cookie: cookie, name: name)
            emit(node, EventMask.moveSelf)
        }
    }

    /// Whether an entry is there.
    func exists(_ path: String) -> Bool { lock.withLock { find(path) != nil } }

    /// Every entry below `directory`: relative path to whether it is a directory, as
    /// ``TreeModel`` compares it.
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
    func read(upTo limit: Int = .max) -> [BackendEvent] {
        lock.withLock {
            let taken = Array(events.prefix(limit))
            events.removeFirst(taken.count)
            if events.count < queueCapacity { overflowQueued = false }
            return taken
        }
    }

    /// Queues the event of a barrier write: the loop's own file, touched.
    func touchBarrier() {
        lock.withLock { enqueue(BackendEvent(wd: Self.barrierWD, mask: EventMask.attributes)) }
    }

    /// The directories watched now, by path.
    var watchedPaths: [String] {
        lock.withLock { watches.values.map { path(of: $0.node) ?? "(unlinked)" }.sorted() }
    }

    /// Descriptors opened and not closed: a leak when a test ends with any.
    var openDescriptors: Int { lock.withLock { open.count } }

    // MARK: - The system calls

    /// The system-call table over this file system.
    var system: System {
        var calls = SystemCalls.unavailable
        calls.openDirectory = { [self] path, _ in lock.withLock { openDirectory(String(cString: path)) } }
        calls.openDirectoryAt = { [self] directory, path, _ in
            lock.withLock { openDirectory(String(cString: path), relativeTo: directory) }
        }
        calls.getdents64 = { [self] fd, buffer, count in lock.withLock { list(fd, into: buffer, count: count) } }
        calls.entryStatus = { [self] directory, name, status in
            lock.withLock { self.status(of: String(cString: name), in: directory, into: status) }
        }
        calls.close = { [self] fd in
            lock.withLock {
                guard open.removeValue(forKey: fd) != nil else { return fail(EBADF) }
                return 0
            }
        }
        return System(calls)
    }

    /// The wall clock of the file system's times, for the router's clocks: a tick on at each
    /// reading (time passes), so an entry born before a reading is older than it, as it is once
    /// the kernel's coarse clock has ticked.
    func readClock() -> EntryStatus.Time {
        lock.withLock {
            tick()
            return EntryStatus.Time(seconds: clock, nanoseconds: 0)
        }
    }

    // MARK: - Inside (with the lock held)

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
            emit(parent, EventMask.create | isDirectoryBit(node), name: name)
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
        if let wd = node.wd { endWatch(wd, selfMask: EventMask.deleteSelf) }
        emit(parent, EventMask.delete | isDirectoryBit(node), name: node.name)
    }

    /// The kernel's end of a watch whose inode is gone: its own event, then `IN_IGNORED`.
    private func endWatch(_ wd: Int32, selfMask: UInt32) {
        guard let watch = watches[wd] else { return }
        emit(watch.node, selfMask)
        enqueue(BackendEvent(wd: wd, mask: EventMask.ignored))
        watch.node.wd = nil
        watches[wd] = nil
    }

    private func tick() { clock += 1 }

    private func isDirectoryBit(_ node: Node) -> UInt32 { node.isDirectory ? EventMask.isDirectory : 0 }

    /// Queues an event on `node`'s watch, if it has one that asked for it.
    private func emit(_ node: Node, _ mask: UInt32, cookie: UInt32 = 0, name: [UInt8] = []) {
        guard let wd = node.wd, let watch = watches[wd] else { return }
        let kind = mask & ~EventMask.isDirectory
        let always = EventMask.ignored | EventMask.unmount
        guard kind & (watch.mask | always) != 0 else { return }
        enqueue(BackendEvent(wd: wd, mask: mask, cookie: cookie, name: name))
    }

    /// Adds an event to the queue, as the kernel does: an event like the last one queued is
    /// merged into it, and a full queue takes one overflow event and drops the rest.
    private func enqueue(_ event: BackendEvent) {
        if overflowQueued { return }
        if events.count >= queueCapacity {
            events.append(BackendEvent(wd: -1, mask: EventMask.queueOverflow))
            overflowQueued = true
            return
        }
        if events.last == event { return }
        events.append(event)
    }

    private func fail<Result: SignedInteger>(_ code: Int32) -> Result {
        errno = code
        return -1
    }

    private func components(_ path: String) -> [[UInt8]] {
        path.split(separator: "/").map { Array($0.utf8) }
    }

    /// The directory open as `fd`.
    private func openNode(_ fd: Int32) -> Node? { open[fd]?.node }

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
    private func addWatch(_ node: Node?, orFailureOf path: String, _ events: UInt32) throws(SyscallError) -> Int32 {
        guard let node else {
            throw SyscallError(function: "watch", errno: path.hasPrefix("/proc/") ? ENOENT : lookUpFailure(path))
        }
        guard node.isDirectory else { throw SyscallError(function: "watch", errno: ENOTDIR) }
        if let wd = node.wd, let watch = watches[wd] {
            watches[wd] = (node, watch.mask | events)
            return wd
        }
        guard watches.count < watchLimit else { throw SyscallError(function: "watch", errno: ENOSPC) }
        let wd = nextWD
        nextWD += 1
        watches[wd] = (node, events)
        node.wd = wd
        return wd
    }

    private func removeWatch(_ wd: Int32) {
        guard let watch = watches.removeValue(forKey: wd) else { return }
        watch.node.wd = nil
        enqueue(BackendEvent(wd: wd, mask: EventMask.ignored))
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
        var written = 0
        while let listing = directory.listing, directory.position < listing.count {
            let entry = listing[directory.position]
            let length = (DirectoryEntryParser.headerSize + entry.name.count + 1 + 7) & ~7
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
            for (offset, byte) in entry.name.enumerated() {
                record[DirectoryEntryParser.headerSize + offset] = byte
            }
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

extension SystemCalls {
    /// A table whose every call fails with `ENOSYS`, for fakes to fill in what they serve.
    static let unavailable: SystemCalls = {
        @Sendable func none() -> Int32 {
            errno = ENOSYS
            return -1
        }
        @Sendable func noBytes() -> Int {
            errno = ENOSYS
            return -1
        }
        return SystemCalls(
            inotifyInit1: { _ in none() }, inotifyAddWatch: { _, _, _ in none() }, inotifyRmWatch: { _, _ in none() },
            epollCreate1: { _ in none() }, epollCtl: { _, _, _, _, _ in none() },
            epollWait: { _, _, _, _, _ in none() }, eventfd: { _, _ in none() }, memfdCreate: { _ in none() },
            read: { _, _, _ in noBytes() }, write: { _, _, _ in noBytes() }, futimens: { _, _ in none() },
            close: { _ in none() },
            getcwd: { _, _ in
                errno = ENOSYS
                return nil
            },
            pthreadCreate: { _, _, _ in ENOSYS }, readlink: { _, _, _ in noBytes() }, openDirectory: { _, _ in none() },
            openDirectoryAt: { _, _, _ in none() }, openFile: { _ in none() }, getdents64: { _, _, _ in noBytes() },
            entryStatus: { _, _, _ in none() }, fileSystemType: { _ in Int64(none()) }, fanotifyInit: { none() },
            fanotifyMarkFileSystem: { _, _, _, _ in none() }, nameToHandle: { _, _, _, _, _ in none() },
            openByHandle: { _, _, _, _ in none() }, fileSystemID: { _, _ in none() }, pollNow: { _, _ in none() })
    }()
}

extension MemoryFileSystem: DirectoryWatchBackend {
    func watch(_ path: FileSystemPath, events: UInt32, followingLinks: Bool) throws(SyscallError) -> Int32 {
        lock.lock()
        defer { lock.unlock() }
        return try addWatch(find(path.description), orFailureOf: path.description, events)
    }

    func watch(openDirectory directory: Int32, events: UInt32) throws(SyscallError) -> Int32 {
        lock.lock()
        defer { lock.unlock() }
        return try addWatch(openNode(directory), orFailureOf: "/proc/self/fd/\(directory)", events)
    }

    func unwatch(_ descriptor: Int32) {
        lock.withLock { removeWatch(descriptor) }
    }
}
