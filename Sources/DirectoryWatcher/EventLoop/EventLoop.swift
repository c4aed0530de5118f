import CDirectoryWatcherShims
import Dispatch
import Glibc
import Synchronization

/// One thread blocked in `epoll_wait` over one inotify descriptor, serving many watchers.
///
/// The loop does the loop: the thread, `epoll_wait`, the eventfd inbox, reading the kernel queue,
/// and the rename-pairing timer. What the events mean and whom they reach is the ``Router``'s.
///
/// The thread sleeps with no timeout while nothing is pending, so an idle process wakes up zero
/// times a second. It wakes for three reasons: the inotify descriptor is readable, the eventfd
/// was signalled (a task from another thread: subscribe, unsubscribe, barrier, shutdown), or a
/// `MOVED_FROM` waiting for its partner reached its deadline.
///
/// Ownership: the router and the fields marked "loop thread only" are touched by ``run()`` and by
/// tasks, which run on the loop thread; ``execute(_:)`` is the only way in from other threads.
///
/// Lifetime (Architecture.md, "Lifetimes"): the descriptors are closed by the loop thread as it
/// exits, after it has moved ``Life`` to `.closed` under the lock. Every write to the eventfd is
/// made under the same lock while the loop is not closed, so no thread can write into a
/// descriptor number the loop has closed and the app may since have been given for a file.
final class EventLoop: @unchecked Sendable {
    typealias Task = @Sendable (EventLoop) -> Void

    private enum Token {
        static let inotify: UInt64 = 1
        static let wake: UInt64 = 2
    }

    /// Big enough for hundreds of events per read; a record is at most 16 + NAME_MAX + 1 bytes.
    static let readBufferSize = 64 * 1024
    /// Reads per wake-up before tasks get a turn; epoll is level-triggered, so the rest waits.
    private static let readsPerWakeUp = 16

    /// The thread's name in `ps -L`, `top -H` and debuggers (the kernel keeps 15 bytes).
    static let threadName = "DirWatcher loop"
    /// The loop thread's name once its loop has ended and it is about to exit.
    static let exitingThreadName = "DirWatcher exit"

    let system: System
    private let clock: @Sendable () -> UInt64

    // Set in init; closed by the loop thread as it exits.
    let inotifyFD: Int32
    private let epollFD: Int32
    private let wakeFD: Int32
    private let barrierFD: Int32
    private let barrierWD: Int32

    /// The loop's life: `.open` takes tasks; `.stopping` (``shutdown()`` was called) takes none
    /// and the stop task is in the inbox; `.closed`, the loop thread is closing the descriptors.
    private enum Life { case open, stopping, closed }

    // Any thread, under `lock`. (A pthread mutex rather than `Synchronization.Mutex`, whose
    // futex calls ThreadSanitizer cannot see.)
    private let lock = Lock()
    private var tasks: [Task] = []
    private var life = Life.open
    private var thread: pthread_t?
    /// The loop thread has closed everything and is about to return.
    private var exited = false
    private let loopThread = ThreadIdentity()

    // Loop thread only.
    private let router: Router
    private var queueDrained = true
    private var running = true

    /// Opens the descriptors and starts the thread.
    init(
        system: System = System(), pairingWindow: UInt64 = 10_000_000,
        clock: @escaping @Sendable () -> UInt64 = EventLoop.monotonicNow
    ) throws(SyscallError) {
        self.system = system
        self.clock = clock
        var opened: [Int32] = []
        do {
            inotifyFD = try system.inotifyInit()
            opened.append(inotifyFD)
            epollFD = try system.epollCreate()
            opened.append(epollFD)
            wakeFD = try system.eventFD()
            opened.append(wakeFD)
            (barrierFD, barrierWD) = try Self.openBarrierFile(system: system, inotifyFD: inotifyFD)
            opened.append(barrierFD)
            try system.epollAdd(epollFD, fd: inotifyFD, token: Token.inotify)
            try system.epollAdd(epollFD, fd: wakeFD, token: Token.wake)
        } catch {
            for fd in opened { system.close(fd) }
            throw error
        }
        let (barrierFD, loopThread) = (barrierFD, loopThread)
        router = Router(
            table: WatchTable(inotifyFD: inotifyFD, system: system), pairingWindow: pairingWindow,
            barrierWD: barrierWD, writeBarrierFile: { () throws(SyscallError) in try system.touch(barrierFD) },
            isOnLoopThread: { loopThread.isCurrent })
        do {
            try startThread()
        } catch {
            for fd in opened { system.close(fd) }
            lock.withLock { life = .closed }
            throw error
        }
    }

    deinit {
        // The thread holds the loop until it exits, so a loop dropped while open is a bug.
        assert(lock.withLock { life == .closed }, "an event loop was released with its descriptors open")
    }

    /// The barrier file: an anonymous memory file (nothing in any user directory, nothing left
    /// behind after a crash) watched for `IN_ATTRIB` by this loop's own inotify instance.
    private static func openBarrierFile(system: System, inotifyFD: Int32) throws(SyscallError) -> (Int32, Int32) {
        let fd = try system.memfdCreate("directory-watcher-barrier")
        do {
            let wd = try system.inotifyAddWatch(
                inotifyFD, path: FileSystemPath("/proc/self/fd/\(fd)"), mask: InotifyMask.attributes)
            return (fd, wd)
        } catch {
            system.close(fd)
            throw error
        }
    }

    /// Starts the loop thread, which keeps the loop alive until it exits. Fails like the other
    /// calls (EAGAIN at the thread limit) rather than trapping.
    private func startThread() throws(SyscallError) {
        let retained = Unmanaged.passRetained(self)
        var handle = pthread_t()
        let result = system.calls.pthreadCreate(&handle, retained.toOpaque()) { argument in
            let loop = Unmanaged<EventLoop>.fromOpaque(argument!).takeRetainedValue()
            loop.run()
            return nil
        }
        guard result == 0 else {
            retained.release()
            throw SyscallError(function: "pthread_create", errno: result)
        }
        lock.withLock { thread = handle }
    }

    static func monotonicNow() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    var isOnLoopThread: Bool { loopThread.isCurrent }

    // MARK: - From any thread

    /// Runs `task` on the loop thread. False when the loop is shutting down (the task never runs).
    @discardableResult
    func execute(_ task: @escaping Task) -> Bool {
        lock.withLock {
            guard life == .open else { return false }
            tasks.append(task)
            // Only the first task since the loop last emptied the inbox needs to wake it.
            if tasks.count == 1 { signalLocked() }
            return true
        }
    }

    /// Wakes the loop thread. Only under `lock`: the loop closes the eventfd only after it has
    /// moved to `.closed` under the lock, so here the descriptor is still ours.
    private func signalLocked() {
        precondition(life != .closed, "the loop's eventfd was signalled after it was closed")
        try? system.signal(eventFD: wakeFD)
    }

    /// Runs `body` on the loop thread and returns its result; nil when the loop is shutting down.
    /// On the loop thread itself (a callback delivered there), runs it at once.
    func submitAndWait<Result: Sendable>(_ body: @escaping @Sendable (EventLoop) -> Result) -> Result? {
        if isOnLoopThread { return body(self) }
        let box = ResultBox<Result>()
        let done = DispatchSemaphore(value: 0)
        guard
            execute({ loop in
                box.value = body(loop)
                done.signal()  // the semaphore orders the write before the read below
            })
        else { return nil }
        done.wait()
        return box.value
    }

    /// Stops the thread, which closes the descriptors as it exits. Returns once the thread has
    /// exited, except on the loop thread itself (the last watcher invalidated inside a callback
    /// delivered there), which cannot wait for itself: the thread is detached and exits after the
    /// current wake-up. Only the first call stops the loop; later ones return at once.
    func shutdown() {
        let handle = lock.withLock { () -> pthread_t? in
            guard life == .open else { return nil }
            life = .stopping
            tasks.append { loop in loop.running = false }
            if tasks.count == 1 { signalLocked() }
            return thread
        }
        guard let handle else { return }
        let result = isOnLoopThread ? pthread_detach(handle) : pthread_join(handle, nil)
        precondition(result == 0, "stopping the loop thread failed with error \(result)")
    }

    /// Returns once the loop thread has closed its descriptors (tests: a loop stopped from its own
    /// thread was detached, and nothing else says when it is gone).
    func waitUntilExited() {
        lock.withLock {
            while !exited { lock.wait() }
        }
    }

    // MARK: - The loop

    private func run() {
        loopThread.becomeCurrent()
        CallbackContext.enterForThreadLifetime()
        cdw_set_thread_name(Self.threadName)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readBufferSize, alignment: 16)
        let tokens = UnsafeMutablePointer<UInt64>.allocate(capacity: 4)
        let readiness = UnsafeMutablePointer<UInt32>.allocate(capacity: 4)
        defer {
            buffer.deallocate()
            tokens.deallocate()
            readiness.deallocate()
        }
        while running {
            let count: Int
            do {
                count = try system.epollWait(
                    epollFD, tokens: tokens, events: readiness, max: 4, timeoutMilliseconds: timeoutMilliseconds())
            } catch {
                preconditionFailure("epoll_wait failed: \(error)")
            }
            for index in 0..<count {
                switch tokens[index] {
                case Token.inotify: readEvents(into: buffer)
                case Token.wake: runTasks()
                default: break
                }
            }
            router.expire(now: clock())
            router.finishWakeUp(queueDrained: queueDrained)
        }
        tearDown()
        // pthread_join returns a moment before the kernel drops this thread from
        // /proc/self/task; renaming it first means a thread named `threadName` is a running loop.
        cdw_set_thread_name(Self.exitingThreadName)
        lock.withLock {
            exited = true
            lock.broadcast()
        }
    }

    private func timeoutMilliseconds() -> Int32 {
        guard let deadline = router.deadline else { return -1 }
        let now = clock()
        if deadline <= now { return 0 }
        return Int32(clamping: (deadline - now + 999_999) / 1_000_000)
    }

    private func runTasks() {
        try? system.drain(eventFD: wakeFD)
        let batch = lock.withLock { () -> [Task] in
            defer { tasks = [] }
            return tasks
        }
        for task in batch { task(self) }
    }

    private func readEvents(into buffer: UnsafeMutableRawBufferPointer) {
        for _ in 0..<Self.readsPerWakeUp {
            let count: Int?
            do {
                count = try system.read(inotifyFD, into: buffer)
            } catch {
                // No read error is expected from inotify with this buffer size; report the
                // changes as possibly lost rather than trusting a partial picture.
                router.receive(Router.lossMarker, now: clock())
                return
            }
            guard let count, count > 0 else {
                queueDrained = true
                return
            }
            queueDrained = false
            let parsed = InotifyEventParser.parse(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            let now = clock()
            for event in parsed.events { router.receive(event, now: now) }
            if parsed.malformedTrailingBytes != 0 { router.receive(Router.lossMarker, now: now) }
        }
    }

    private func tearDown() {
        router.tearDown()
        lock.withLock {
            precondition(life == .stopping, "the loop ended without being stopped")
            life = .closed
        }
        // Closing the inotify descriptor removes every kernel watch of this instance.
        for fd in [epollFD, wakeFD, barrierFD, inotifyFD] { system.close(fd) }
    }

    // MARK: - Tasks (run on the loop thread)

    func subscribe(_ subscription: Subscription) -> SyscallError? {
        router.subscribe(subscription)
    }

    func unsubscribe(_ subscription: Subscription) {
        router.unsubscribe(subscription)
    }

    func requestBarrier(for subscription: Subscription, completion: @escaping @Sendable () -> Void) {
        router.requestBarrier(for: subscription, completion: completion)
    }
}

/// Which thread runs a loop, for checks from any thread.
private final class ThreadIdentity: Sendable {
    private let id = Atomic<UInt>(0)

    var isCurrent: Bool { id.load(ordering: .relaxed) == Self.current }

    /// Called first thing on the loop thread.
    func becomeCurrent() { id.store(Self.current, ordering: .relaxed) }

    private static var current: UInt { UInt(bitPattern: Int(bitPattern: pthread_self())) }
}

/// Carries a task's result back to the thread waiting for it.
private final class ResultBox<Value>: @unchecked Sendable {
    var value: Value?
}
