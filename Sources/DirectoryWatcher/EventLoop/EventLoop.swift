import CDirectoryWatcherShims
import Dispatch
import Glibc

/// Threads blocked in `epoll_wait` over one inotify descriptor, serving many watchers.
///
/// The loop does the loop: `epoll_wait`, the task inbox, reading the kernel queue, the
/// rename-pairing timer, and running the watchers' callbacks. What the events mean and whom they
/// reach is the ``Router``'s; who leads is ``Leadership``'s; the threads are ``LoopThreads``'.
///
/// One thread leads at a time: it reads, routes, and runs the callbacks that the router scheduled
/// in mailboxes, itself, with no hand-off to another thread. Before a callback that may block
/// (``DirectoryWatcher/Delivery/automatic``), it makes sure a standby thread is awake; when a
/// callback runs past a tick, the standby takes the lead and reads on, so a slow callback delays
/// its own watcher only (Architecture.md, "Delivery"). Between callbacks the leader reads the
/// kernel queue again every ``readingSlice``, so many short callbacks cannot hold it back either.
///
/// The leader sleeps with no timeout while nothing is pending, so an idle process wakes up zero
/// times a second. It wakes for three reasons: the inotify descriptor is readable, the eventfd
/// was signalled (a task: subscribe, unsubscribe, barrier, shutdown), or a `MOVED_FROM` waiting for
/// its partner reached its deadline.
///
/// Ownership: the router, the ready mailboxes and the buffers are the leader's; ``execute(_:)`` is
/// the only way in from other threads. The descriptors are closed by the leader as it exits.
final class EventLoop: @unchecked Sendable {
    private enum Token {
        static let inotify: UInt64 = 1
        static let wake: UInt64 = 2
    }

    /// Big enough for hundreds of events per read; a record is at most 16 + NAME_MAX + 1 bytes.
    static let readBufferSize = 64 * 1024
    /// Reads per wake-up before tasks get a turn; epoll is level-triggered, so the rest waits.
    private static let readsPerWakeUp = 16
    /// Callbacks run for at most this long before the leader reads the kernel queue again.
    static let readingSlice: UInt64 = 2_000_000

    /// The loop's threads' name in `ps -L`, `top -H` and debuggers (the kernel keeps 15 bytes).
    static let threadName = "DirWatcher loop"
    /// A loop thread's name once it is about to exit.
    static let exitingThreadName = "DirWatcher exit"

    let system: System
    private let clock: @Sendable () -> UInt64
    private let inbox: TaskInbox
    private let leadership = Leadership()
    private let threads = LoopThreads()

    // Set in init; closed by the leader as the loop stops.
    let inotifyFD: Int32
    private let epollFD: Int32
    private let barrierFD: Int32

    // The leader's.
    private let router: Router
    private var ready: [Mailbox] = []
    private var readyHead = 0
    private var queueDrained = true
    private var running = true
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: EventLoop.readBufferSize, alignment: 16)
    private let tokens = UnsafeMutablePointer<UInt64>.allocate(capacity: 4)
    private let readiness = UnsafeMutablePointer<UInt32>.allocate(capacity: 4)

    /// Opens the descriptors and starts the first thread.
    init(
        system: System = System(), pairingWindow: UInt64 = 10_000_000,
        clock: @escaping @Sendable () -> UInt64 = EventLoop.monotonicNow
    ) throws(SyscallError) {
        self.system = system
        self.clock = clock
        var opened: [Int32] = []
        let barrierWD: Int32
        do {
            inotifyFD = try system.inotifyInit()
            opened.append(inotifyFD)
            epollFD = try system.epollCreate()
            opened.append(epollFD)
            inbox = TaskInbox(wakeFD: try system.eventFD(), system: system)
            opened.append(inbox.wakeFD)
            (barrierFD, barrierWD) = try Self.openBarrierFile(system: system, inotifyFD: inotifyFD)
            opened.append(barrierFD)
            try system.epollAdd(epollFD, fd: inotifyFD, token: Token.inotify)
            try system.epollAdd(epollFD, fd: inbox.wakeFD, token: Token.wake)
        } catch {
            for fd in opened { system.close(fd) }
            throw error
        }
        let (barrierFD, leadership) = (barrierFD, leadership)
        router = Router(
            table: WatchTable(inotifyFD: inotifyFD, system: system), pairingWindow: pairingWindow,
            barrierWD: barrierWD, writeBarrierFile: { () throws(SyscallError) in try system.touch(barrierFD) },
            isOnLoopThread: { leadership.isCurrentThreadLeader })
        var failure: Int32 = 0
        guard threads.start(.leading, create: { createThread(.leading, failure: &failure) }) else {
            for fd in opened { system.close(fd) }
            inbox.closeUnstarted()
            throw SyscallError(function: "pthread_create", errno: failure)
        }
    }

    deinit {
        // The threads hold the loop until they exit, so a loop dropped while open is a bug.
        assert(inbox.isClosed, "an event loop was released with its descriptors open")
        buffer.deallocate()
        tokens.deallocate()
        readiness.deallocate()
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

    static func monotonicNow() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    // MARK: - From any thread

    /// Runs `task` on the leader. False when the loop is shutting down (the task never runs).
    @discardableResult
    func execute(_ task: @escaping TaskInbox.Task) -> Bool {
        inbox.execute(task)
    }

    /// Runs `body` on the leader and returns its result; nil when the loop is shutting down. On
    /// the leader itself (inside a callback), runs it at once.
    func submitAndWait<Result: Sendable>(_ body: @escaping @Sendable (EventLoop) -> Result) -> Result? {
        let (leads, inCallback) = leadership.pause()
        if leads {
            defer { resumeCallback(inCallback) }
            return body(self)
        }
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

    /// Stops the loop, whose leader closes the descriptors. Returns once its threads have exited,
    /// except on one of them (the last watcher invalidated inside a callback), which cannot wait
    /// for itself: a Dispatch worker joins them instead. Later calls return at once.
    func shutdown() {
        guard inbox.stop({ loop in loop.running = false }) else { return }
        if threads.isMember {
            DispatchQueue.global().async { [self] in
                inbox.waitUntilExited()
                threads.joinAll()
            }
        } else {
            inbox.waitUntilExited()
            threads.joinAll()
        }
    }

    /// When the loop is stopping, returns once it has stopped (``waitUntilExited()``); at once
    /// while it runs.
    func waitIfStopping() {
        if !inbox.isOpen { waitUntilExited() }
    }

    /// Returns once the descriptors are closed and the threads joined, however the loop was
    /// stopped (tests: a loop stopped from its own thread is joined by a Dispatch worker).
    func waitUntilExited() {
        inbox.waitUntilExited()
        threads.waitUntilJoined()
    }

    // MARK: - Threads

    private final class ThreadStart {
        let loop: EventLoop
        let role: LoopThreads.Role
        init(loop: EventLoop, role: LoopThreads.Role) {
            self.loop = loop
            self.role = role
        }
    }

    /// Starts a thread that keeps the loop alive until it exits; nil at the thread limit.
    private func createThread(_ role: LoopThreads.Role, failure: inout Int32) -> pthread_t? {
        let start = Unmanaged.passRetained(ThreadStart(loop: self, role: role))
        var handle = pthread_t()
        let result = system.calls.pthreadCreate(&handle, start.toOpaque()) { argument in
            let start = Unmanaged<ThreadStart>.fromOpaque(argument!).takeRetainedValue()
            start.loop.threadMain(startingAs: start.role)
            return nil
        }
        guard result == 0 else {
            start.release()
            failure = result
            return nil
        }
        return handle
    }

    private func startStandby() -> pthread_t? {
        var failure: Int32 = 0
        return createThread(.standby, failure: &failure)
    }

    private func threadMain(startingAs role: LoopThreads.Role) {
        CallbackContext.enterForThreadLifetime()
        cdw_set_thread_name(Self.threadName)
        var leads = role == .leading
        if leads { leadership.lead() }
        while true {
            if leads {
                if lead() { break }
                // Deposed in a callback, whose watcher's deliveries this thread has finished.
                threads.setRole(.deposed)
                guard threads.deposedLeaderIsFree() else { break }
                leads = false
            } else {
                guard stand() else { break }
                leads = true
            }
        }
        // pthread_join returns a moment before the kernel drops this thread from
        // /proc/self/task; renaming it first means a thread named `threadName` is a running one.
        cdw_set_thread_name(Self.exitingThreadName)
        threads.finish()
    }

    /// Stands by until it takes the lead (true) or the loop closes (false).
    private func stand() -> Bool {
        var watch = StallWatch(ticksBeforeParking: LoopThreads.ticksBeforeParking)
        while true {
            let phase = leadership.observe()
            switch watch.tick(phase: phase) {
            case .takeOver(let observed):
                if leadership.takeOver(from: observed) {
                    threads.standbyLeads()
                    return true
                }
            case .park:
                guard threads.park(stillQuiet: { leadership.observe() == phase }) else { return false }
                watch.reset()
                continue
            case .wait:
                break
            }
            guard threads.tick() else { return false }
        }
    }

    // MARK: - Leading

    /// Leads until the loop stops (true: this thread closed it) or a standby takes the lead from a
    /// callback running on this thread (false).
    private func lead() -> Bool {
        while running {
            let count: Int
            do {
                count = try system.epollWait(
                    epollFD, tokens: tokens, events: readiness, max: 4,
                    timeoutMilliseconds: readyHead < ready.count ? 0 : timeoutMilliseconds())
            } catch {
                preconditionFailure("epoll_wait failed: \(error)")
            }
            for index in 0..<count {
                switch tokens[index] {
                case Token.inotify: readEvents()
                case Token.wake: for task in inbox.take() { task(self) }
                default: break
                }
            }
            router.expire(now: clock())
            router.finishWakeUp(queueDrained: queueDrained)
            ready.append(contentsOf: router.takeReady())
            guard deliverReady() else { return false }
        }
        tearDown()
        return true
    }

    private func timeoutMilliseconds() -> Int32 {
        guard let deadline = router.deadline else { return -1 }
        let now = clock()
        if deadline <= now { return 0 }
        return Int32(clamping: (deadline - now + 999_999) / 1_000_000)
    }

    private func readEvents() {
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

    /// Runs the ready mailboxes in order until none is left or the kernel queue is due a read
    /// (the rest run after it). False when this thread was deposed in a callback.
    private func deliverReady() -> Bool {
        guard readyHead < ready.count else { return true }
        let started = clock()
        while readyHead < ready.count {
            let mailbox = ready[readyHead]
            readyHead += 1
            guard run(mailbox) else { return false }
            if readyHead < ready.count, clock() &- started > Self.readingSlice { return true }
        }
        ready.removeAll(keepingCapacity: true)
        readyHead = 0
        return true
    }

    /// Drains `mailbox`. A block that may block runs in the callback phase with a standby awake;
    /// when the standby took the lead meanwhile, this thread no longer leads: it runs the rest of
    /// this watcher's deliveries (no other thread will, the mailbox being scheduled) and returns
    /// false without touching the leader's state again.
    private func run(_ mailbox: Mailbox) -> Bool {
        while let blocks = mailbox.next() {
            for (index, block) in blocks.enumerated() {
                guard mailbox.mayBlock else {
                    block()
                    continue
                }
                resumeCallback(true)
                block()
                guard leadership.leaveCallback() else {
                    for rest in blocks[(index + 1)...] { rest() }
                    mailbox.drain()
                    return false
                }
            }
        }
        return true
    }

    private func resumeCallback(_ inCallback: Bool) {
        guard inCallback else { return }
        leadership.enterCallback()
        threads.ensureStandby(start: startStandby)
    }

    /// The loop is stopping. What is still to be delivered goes to Dispatch: the thread that
    /// stops the loop may be waiting for these descriptors to close, and a callback run here
    /// could be waiting for that thread.
    private func tearDown() {
        router.tearDown()
        ready.append(contentsOf: router.takeReady())
        for mailbox in ready[readyHead...] {
            DispatchQueue.global().async { CallbackContext.run { mailbox.drain() } }
        }
        ready = []
        inbox.close()
        // Closing the inotify descriptor removes every kernel watch of this instance.
        for fd in [epollFD, inbox.wakeFD, barrierFD, inotifyFD] { system.close(fd) }
        threads.close()
        inbox.markExited()
    }

    // MARK: - Tasks (run on the leader)

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

/// Carries a task's result back to the thread waiting for it.
private final class ResultBox<Value>: @unchecked Sendable {
    var value: Value?
}
