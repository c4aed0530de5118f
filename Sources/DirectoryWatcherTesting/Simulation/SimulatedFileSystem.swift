@_spi(DirectoryWatcherTesting) import DirectoryWatcher
import Dispatch
import Glibc
import Synchronization

/// A file system in memory, and watchers of it that are the library's own: the way to test what
/// your code does when a folder changes, including what the kernel rarely does on cue (a queue
/// overflow and the rescan after it, the watched folder removed, a watch refused, a rename whose
/// second half never comes, a settled batch) with no disk, no sleeping and no flakiness.
///
/// ```swift
/// let files = SimulatedFileSystem()
/// files.createDirectory("/inbox")
/// let list = DocumentList()
/// let watcher = try files.watchFolder(path: "/inbox", delegate: list)
/// files.createFile("/inbox/report.txt")
/// await files.waitUntilDelivered()
/// XCTAssertEqual(list.names, ["report.txt"])
/// ```
///
/// Only the kernel is simulated. A watcher made here (``watchFolder(path:options:delegate:queue:)``)
/// is a real `DirectoryWatcher` on a real event loop with its own threads: the simulation answers
/// the loop's system calls (`inotify_add_watch`, the `read` of the inotify queue, `getdents64` and
/// `statx` for listings), and everything above them (parsing the kernel's records, pairing renames,
/// rescans, settling, delivery on your queue, the order of callbacks) is the code that runs in
/// production. Each change you make queues the events inotify would queue, in its order, before the
/// call returns.
///
/// Time stands still unless you move it (``passTime(_:)``): a rename's first half waits for its
/// second, and a settled batch for its quiet period, until you do. The simulation is inotify's:
/// a tree (`DirectoryWatcher/Options/recursive`) is watched directory by directory, never with
/// fanotify; polling (`DirectoryWatcher/Backend/polling`) lists the simulated tree at each poll.
///
/// Paths are absolute (`/inbox/report.txt`) and name entries of the simulation only. A change to
/// an entry that is not there, or a parent that is missing, is a mistake in the test: it stops the
/// test with a message naming the path. Safe from any thread.
public final class SimulatedFileSystem: Sendable {
    let kernel = SimulatedKernel()
    private let clock = HandClock()
    private let loop: EventLoop
    private let watchers = Locked<[WeakWatcher]>([])

    /// An empty file system: only its root, `/`.
    public init() {
        let clock = clock
        do {
            loop = try EventLoop(calls: kernel.calls(over: .live.sleepingUntilWoken), clock: { clock.now })
            _ = Self.loops.withLock { $0.insert(ObjectIdentifier(loop)) }
        } catch {
            // Only epoll, an eventfd or a thread can fail here, which no test can do without.
            fatalError("the simulation's event loop could not start: \(error)")
        }
    }

    deinit {
        _ = Self.loops.withLock { $0.remove(ObjectIdentifier(loop)) }
        loop.shutdown()
    }

    /// The loops of the simulations alive now, so that an on-disk helper given a simulated
    /// watcher can say so rather than fail on a path the simulation does not hold.
    private static let loops = Locked<Set<ObjectIdentifier>>([])

    /// Whether `loop` is a simulation's.
    static func isSimulated(_ loop: EventLoop) -> Bool {
        loops.withLock { $0.contains(ObjectIdentifier(loop)) }
    }

    // MARK: - Changes

    /// Makes a directory, and its missing parents, as `mkdir -p` does.
    public func createDirectory(_ path: String) {
        kernel.mkdirs(checked(path))
    }

    /// Makes an empty file, as `open(O_CREAT)` and `close` do; its parent must exist.
    public func createFile(_ path: String) {
        kernel.create(checked(path))
    }

    /// Writes to a file and closes it: the file's size and times change. A file that is not there
    /// is created first.
    public func write(_ path: String) {
        let path = checked(path)
        if !kernel.exists(path) { kernel.create(path) }
        kernel.write(path)
    }

    /// Opens a file and writes to it, and leaves it open: a writer still at work, whose
    /// ``endWriting(_:)`` is what a settled watcher waits for. A missing file is created first.
    public func beginWriting(_ path: String) {
        let path = checked(path)
        if !kernel.exists(path) { kernel.create(path) }
        kernel.beginWriting(path)
    }

    /// Closes a file that ``beginWriting(_:)`` left open.
    public func endWriting(_ path: String) {
        kernel.endWriting(checked(path))
    }

    /// Renames an entry, as `rename(2)` does: a file at `newPath` is replaced. A move into or out
    /// of a directory no watcher watches queues one half of the kernel's pair only, as inotify's
    /// does: a watcher reports it as `DirectoryChange/Kind/movedOut` (once the pairing window has
    /// passed, ``passTime(_:)``) or `DirectoryChange/Kind/movedIn`.
    public func rename(_ path: String, to newPath: String) {
        kernel.rename(checked(path), to: checked(newPath))
    }

    /// Removes an entry, and a directory's contents first, as `rm -r` does. Removing a watched
    /// directory ends its watch with `DirectoryChange/Kind/rootRemoved`.
    public func remove(_ path: String) {
        kernel.remove(checked(path))
    }

    /// Changes an entry's permission bits. A directory without read permission cannot be listed:
    /// a watcher that must list it reports `DirectoryChange/Kind/failed` for it (or its start
    /// fails with `DirectoryWatcherError/Code/permissionDenied`).
    public func setPermissions(_ path: String, _ permissions: UInt32) {
        kernel.chmod(checked(path), permissions)
    }

    /// Whether an entry is at `path`.
    public func exists(_ path: String) -> Bool { kernel.exists(path) }

    // MARK: - What the kernel rarely does on cue

    /// Makes the changes of `changes` while the kernel's queue is full: their events are lost,
    /// and the queue holds one overflow event in their place, as inotify's does when its reader
    /// falls behind. A watcher then reports `DirectoryChange/Kind/overflow` and, with exact
    /// recovery (the default), each change the rescan finds, marked
    /// `DirectoryChange/foundByRescan`. Nothing is read until `changes` returns, so every one of
    /// its changes is lost from the queue, and found by the rescan.
    public func losingEvents(_ changes: () -> Void) {
        kernel.losingEvents(changes)
    }

    /// From now on, a watch of the directory at `path` fails with `code`, as the kernel's does:
    /// `DirectoryWatcherError/Code/permissionDenied`, `DirectoryWatcherError/Code/watchLimitReached`,
    /// `DirectoryWatcherError/Code/outOfMemory`, `DirectoryWatcherError/Code/noSuchPath` or
    /// `DirectoryWatcherError/Code/other(errno:)`. A watcher started on it throws that error; a
    /// tree that reaches it reports `DirectoryChange/Kind/failed` with the error and goes on.
    /// Pass nil to let watches of it succeed again.
    public func refuseWatches(of path: String, with code: DirectoryWatcherError.Code?) {
        let path = checked(path)
        precondition(kernel.isDirectory(path) == true, "\(path) is no directory of the simulation")
        kernel.refuseWatches(of: path, errno: code.map(Self.errno(for:)))
    }

    /// How many directories may be watched at once (inotify's `max_user_watches`); past it, a
    /// watch fails with `DirectoryWatcherError/Code/watchLimitReached`. No limit by default.
    public var watchLimit: Int {
        get { kernel.watchLimit }
        set { kernel.watchLimit = newValue }
    }

    /// Moves the watchers' clock on by `duration`, and lets them act on it: a rename's first half
    /// whose second never came is reported as moved out once the pairing window (10 ms) has
    /// passed, and a settled batch is handed over once its quiet period has. Then call
    /// ``waitUntilDelivered()``.
    ///
    /// Every change made before the call is read at the time before it: the clock moves once the
    /// loop has read them. Not from a watcher's callback on the loop's thread
    /// (`DirectoryWatcher/Delivery/eventLoopThread`), which would wait for itself.
    public func passTime(_ duration: Duration) {
        precondition(duration >= .zero, "time does not go back: \(duration)")
        kernel.waitUntilRead()
        let (seconds, attoseconds) = duration.components
        clock.advance(by: UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000))
        kernel.wakeReader()
    }

    // MARK: - Watching

    /// Starts watching the directory at `path` of this file system, as
    /// `DirectoryWatcher/watchFolder(path:options:delegate:queue:)` watches one on disk: the
    /// same watcher, the same options and delivery.
    public func watchFolder(
        path: String, options: DirectoryWatcher.Options = DirectoryWatcher.Options(),
        delegate: any DirectoryWatcherDelegate, queue: DispatchQueue? = nil
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        keep(try DirectoryWatcher.watchFolder(path: path, options: options, delegate: delegate, queue: queue, on: loop))
    }

    /// Starts watching the directory at `path` of this file system and calls `handler` with each
    /// batch, as `DirectoryWatcher/watchFolder(path:options:queue:handler:)` does.
    public func watchFolder(
        path: String, options: DirectoryWatcher.Options = DirectoryWatcher.Options(), queue: DispatchQueue? = nil,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        keep(try DirectoryWatcher.watchFolder(path: path, options: options, queue: queue, on: loop, handler: handler))
    }

    /// Starts watching one file of this file system by name, as
    /// `DirectoryWatcher.watchFile(path:options:delegate:queue:)` watches one on disk: the watch
    /// survives the file being replaced by a rename (an editor's atomic save).
    public func watchFile(
        path: String, options: DirectoryWatcher.Options = DirectoryWatcher.Options(),
        delegate: any DirectoryWatcherDelegate, queue: DispatchQueue? = nil
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        keep(try DirectoryWatcher.watchFile(path: path, options: options, delegate: delegate, queue: queue, on: loop))
    }

    /// The changes of the directory at `path` of this file system, one at a time, as
    /// `DirectoryWatcher.changes(path:options:bufferLimit:)` gives those of one on disk: each
    /// change made here is the sequence's next element once the loop has read it.
    /// ``waitUntilDelivered()`` does not cover the sequence; its consumer waits for its next
    /// element.
    public func changes(
        path: String, options: DirectoryWatcher.Options = DirectoryWatcher.Options(),
        bufferLimit: Int = DirectoryChanges.defaultBufferLimit
    ) throws(DirectoryWatcherError) -> DirectoryChanges {
        try DirectoryWatcher.changes(path: path, options: options, bufferLimit: bufferLimit, on: loop)
    }

    /// Returns once every change made so far has been delivered to every watcher made here: each
    /// watcher's `DirectoryWatcher/barrier()`.
    ///
    /// A barrier follows what came before it, and so waits for what waits for time: a settled
    /// batch in its quiet period, a rename's first half in its pairing window. Time moves only
    /// with ``passTime(_:)``: move it past those first, or this waits for them for ever.
    public func waitUntilDelivered() async {
        let live = watchers.withLock { list in
            list.removeAll { $0.watcher == nil }
            return list.compactMap(\.watcher)
        }
        for watcher in live { await watcher.barrier() }
    }

    // MARK: - Inside

    private func keep(_ watcher: DirectoryWatcher) -> DirectoryWatcher {
        watchers.withLock { $0.append(WeakWatcher(watcher: watcher)) }
        return watcher
    }

    private func checked(_ path: String) -> String {
        precondition(path.hasPrefix("/"), "\"\(path)\": a simulated path is absolute")
        return path
    }

    static func errno(for code: DirectoryWatcherError.Code) -> Int32 {
        switch code {
        case .permissionDenied: return EACCES
        case .watchLimitReached: return ENOSPC
        case .outOfMemory: return ENOMEM
        case .noSuchPath: return ENOENT
        case .notADirectory: return ENOTDIR
        case .nameTooLong: return ENAMETOOLONG
        case .symbolicLinkLoop: return ELOOP
        default:
            for number in Int32(1)..<Int32(134) where code == .other(errno: number) { return number }
            preconditionFailure("\(code): not an error a watch can fail with")
        }
    }
}

/// A watcher the simulation made, held weakly: the test owns it.
private struct WeakWatcher: Sendable {
    weak var watcher: DirectoryWatcher?
}

/// The watchers' clock, in nanoseconds, moved by the test alone.
private final class HandClock: Sendable {
    private let value = Atomic<UInt64>(1_000_000_000)
    var now: UInt64 { value.load(ordering: .acquiring) }
    func advance(by nanoseconds: UInt64) { value.add(nanoseconds, ordering: .releasing) }
}

extension SystemCalls {
    /// epoll waits with no timeout: the loop's deadlines are on the hand clock, which only moves
    /// when the test moves it, and then wakes the loop (``SimulatedKernel/wakeReader()``).
    fileprivate var sleepingUntilWoken: SystemCalls {
        var calls = self
        let wait = epollWait
        calls.epollWait = { epfd, tokens, events, max, timeout in
            wait(epfd, tokens, events, max, timeout > 0 ? -1 : timeout)
        }
        return calls
    }
}
