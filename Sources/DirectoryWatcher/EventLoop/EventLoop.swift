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
/// was signalled (a task: subscribe, unsubscribe, barrier, shutdown), or one of the router's
/// deadlines came (a `MOVED_FROM` waiting for its partner, a settled batch due), which it sleeps
/// to to the nanosecond.
///
/// Ownership: the router, the ready mailboxes and the buffers are the leader's; ``execute(_:)`` is
/// the only way in from other threads. The descriptors are closed by the leader as it exits.
///
/// The test kit makes its own loop over a simulated kernel (``SystemCalls``), and watchers on it.
@_spi(DirectoryWatcherTesting)
public final class EventLoop: @unchecked Sendable {
    private enum Token {
        static let inotify: UInt64 = 1
        static let wake: UInt64 = 2
        static let fanotify: UInt64 = 3
        static let mountTable: UInt64 = 4
    }

    /// Big enough for hundreds of events per read; a record is at most 16 + NAME_MAX + 1 bytes.
    static let readBufferSize = 64 * 1024
    /// The longest inotify record: header and a name of NAME_MAX bytes with its NUL.
    private static let largestRecord = 16 + Int(NAME_MAX) + 1
    /// The longest fanotify record read: the metadata, two directory records (a rename's) of a
    /// handle of at most 128 bytes and a name, and the object's own handle.
    private static let largestFanotifyRecord = 24 + 2 * (4 + 8 + 8 + 128 + Int(NAME_MAX) + 1) + (4 + 8 + 8 + 128)
    /// Reads per wake-up before tasks get a turn; epoll is level-triggered, so the rest waits.
    private static let readsPerWakeUp = 16
    /// Callbacks run for at most this long before the leader reads the kernel queue again.
    static let readingSlice: UInt64 = 2_000_000

    /// The loop's threads' name in `ps -L`, `top -H` and debuggers (the kernel keeps 15 bytes).
    static let threadName = "DirWatcher loop"
    /// A loop thread's name once it is about to exit.
    static let exitingThreadName = "DirWatcher exit"

    let system: System
    let clock: @Sendable () -> UInt64
    let inbox: TaskInbox
    let leadership = Leadership()
    let threads = LoopThreads()

    // Set in init; closed by the leader as the loop stops.
    /// The inotify instance; -1 when there is none (``inotifyUnavailable``).
    let inotifyFD: Int32
    /// Why the loop has no inotify instance, when it was allowed to start without one: the
    /// kernel has no inotify (`ENOSYS`), or the user's instances are used up (`EMFILE`). Only
    /// polled watchers can then be served; an inotify watcher's subscribe fails with this error.
    let inotifyUnavailable: SyscallError?
    private let epollFD: Int32
    private let barrierFD: Int32

    // The leader's. (The mailboxes it delivers are the leader's alone, so the runtime's
    // exclusivity checks would only cost time: two a wake-up.)
    let router: Router
    @exclusivity(unchecked) var ready: [Mailbox] = []
    @exclusivity(unchecked) var readyHead = 0
    // Leader only, read at every wake-up: the runtime's exclusivity checks would only cost time.
    @exclusivity(unchecked) private var queueDrained = true
    /// Whether the leader lets events gather before its next wait, and the events the current
    /// wake-up read, which tell it.
    @exclusivity(unchecked) private var pacing = BurstPacing()
    @exclusivity(unchecked) private var eventsRead = 0
    /// How many times the leader has paused for a stream (tests: that it paces one).
    @exclusivity(unchecked) private(set) var pausesTaken = 0
    /// The fanotify group, opened when the first tree uses it (``Router/subscribeMarked(_:)``);
    /// -1 until then. Leader only.
    @exclusivity(unchecked) private var fanotifyFD: Int32 = -1
    @exclusivity(unchecked) private var fanotifyDrained = true
    /// How many events the group's queue holds (`fs.fanotify.max_queued_events`), read when it opens.
    private var fanotifyQueueCapacity = 16_384
    /// `/proc/self/mountinfo`, polled for the mount table's changes while a tree follows them
    /// (``Router/followMounts(_:from:)``); -1 otherwise. Leader only.
    @exclusivity(unchecked) private var mountTableFD: Int32 = -1
    @exclusivity(unchecked) var running = true
    /// While true, the inotify descriptor is out of the epoll set and not read: the kernel's
    /// queue fills as it does behind a slow reader (``holdReading(_:)``, the test kit's way to
    /// overflow it on disk). Leader only.
    @exclusivity(unchecked) private var readingHeld = false
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: EventLoop.readBufferSize, alignment: 16)
    /// A read's copy, which its events' names are slices of, and its events: kept from read to
    /// read, so that a read allocates neither (``InotifyEventParser/parse(_:copyingInto:appendingTo:)``).
    /// Leader only; the runtime's exclusivity checks would only cost time.
    @exclusivity(unchecked) private var readCopy: [UInt8] = []
    @exclusivity(unchecked) private var parsedEvents: [BackendEvent] = []
    /// The same for fanotify's reads (``FanotifyEventParser/parse(_:copyingInto:appendingTo:descriptors:)``),
    /// with the descriptors its records came with (none in the library's reporting mode).
    @exclusivity(unchecked) private var fanotifyCopy: [UInt8] = []
    @exclusivity(unchecked) private var parsedMarkEvents: [MarkEvent] = []
    @exclusivity(unchecked) private var openedDescriptors: [Int32] = []
    private let tokens = UnsafeMutablePointer<UInt64>.allocate(capacity: EventLoop.readyAtOnce)
    private let readiness = UnsafeMutablePointer<UInt32>.allocate(capacity: EventLoop.readyAtOnce)
    /// As many descriptors as the epoll set can hold: inotify, the eventfd, fanotify, the mount table.
    private static let readyAtOnce = 4

    /// Opens the descriptors and starts the first thread.
    ///
    /// `startsWithoutInotify`: when inotify is unavailable (`ENOSYS`, `EMFILE` from
    /// `inotify_init1`), start anyway, for polled watchers only (the shared loop does; a watcher
    /// whose backend is automatic then polls).
    init(
        system: System = System(), pairingWindow: UInt64 = 10_000_000,
        clock: @escaping @Sendable () -> UInt64 = System.monotonicNow, startsWithoutInotify: Bool = false
    ) throws(SyscallError) {
        self.system = system
        self.clock = clock
        var opened: [Int32] = []
        let barrierWD: Int32
        do throws(SyscallError) {
            var unavailable: SyscallError?
            do throws(SyscallError) {
                inotifyFD = try system.inotifyInit()
                opened.append(inotifyFD)
            } catch {
                // (Out of descriptors, the process could not poll either: that is the error.)
                let missing = error.errno == ENOSYS || (error.errno == EMFILE && !error.processOutOfDescriptors)
                guard startsWithoutInotify && missing else { throw error }
                inotifyFD = -1
                unavailable = error
            }
            inotifyUnavailable = unavailable
            epollFD = try system.epollCreate()
            opened.append(epollFD)
            inbox = TaskInbox(wakeFD: try system.eventFD(), system: system)
            opened.append(inbox.wakeFD)
            if inotifyFD >= 0 {
                (barrierFD, barrierWD) = try Self.openBarrierFile(system: system, inotifyFD: inotifyFD)
                opened.append(barrierFD)
                try system.epollAdd(epollFD, fd: inotifyFD, token: Token.inotify)
            } else {
                // No barrier file without inotify: a polled watcher's barrier polls instead.
                (barrierFD, barrierWD) = (-1, -1)
            }
            try system.epollAdd(epollFD, fd: inbox.wakeFD, token: Token.wake)
        } catch {
            for fd in opened { system.close(fd) }
            throw error
        }
        let (barrierFD, leadership) = (barrierFD, leadership)
        let fanotify = FanotifyBackend(system: system)
        router = Router(
            table: WatchTable(backend: InotifyBackend(fd: inotifyFD, system: system), system: system),
            pairingWindow: pairingWindow,
            barrierWD: barrierWD, writeBarrierFile: { () throws(SyscallError) in try system.touch(barrierFD) },
            isOnLoopThread: { leadership.isCurrentThreadLeader },
            wakeForCatchUp: { [inbox] subscription in
                _ = inbox.execute { loop in loop.router.backlogDrained(subscription) }
            },
            listDirectory: { path throws(SyscallError) in try Snapshot.read(path, system: system) },
            listNames: { path, visit throws(SyscallError) in try Snapshot.readNames(path, system: system, visit) },
            clock: clock, inotifyUnavailable: inotifyUnavailable,
            isUnchanged: { path, old throws(SyscallError) in try Snapshot.isUnchanged(path, since: old, system: system)
            }, marks: fanotify)
        router.services.visitEntries = { path, visit throws(SyscallError) in
            try Snapshot.visitEntriesOnEveryCore(path, system: system, visit)
        }
        router.services.readInodes = { path, names, visit throws(SyscallError) in
            try Snapshot.readInodes(of: names, in: path, system: system, visit)
        }
        fanotify.open = { [unowned self] () throws(SyscallError) -> Int32 in
            let fd = try system.fanotifyInit()
            do throws(SyscallError) {
                try system.epollAdd(epollFD, fd: fd, token: Token.fanotify)
            } catch {
                system.close(fd)
                throw error
            }
            fanotifyFD = fd
            if let text = system.readProcFile("/proc/sys/fs/fanotify/max_queued_events"),
                let capacity = Int(String(text.prefix { $0.isNumber })), capacity > 0
            {
                fanotifyQueueCapacity = capacity
            }
            return fd
        }
        fanotify.close = { [unowned self] in
            system.close(fanotifyFD)  // (which takes it out of the epoll set too)
            fanotifyFD = -1
            fanotifyDrained = true
        }
        router.services.drainMarks = { [unowned self] in readFanotifyEvents(now: clock(), untilDrained: true) }
        router.services.openMountPoll = { [unowned self] () throws(SyscallError) in
            let fd = try system.openMountTable()
            do throws(SyscallError) {
                try system.epollAddForPriority(epollFD, fd: fd, token: Token.mountTable)
            } catch {
                system.close(fd)
                throw error
            }
            mountTableFD = fd
        }
        router.services.mountPollFired = { [unowned self] in mountTableFD >= 0 && system.mountTableChanged(mountTableFD)
        }
        router.services.closeMountPoll = { [unowned self] in
            system.close(mountTableFD)  // (which takes it out of the epoll set too)
            mountTableFD = -1
        }
        var failure: Int32 = 0
        guard threads.start(.leading, create: { createThread(.leading, failure: &failure) }) else {
            for fd in opened { system.close(fd) }
            inbox.closeUnstarted()
            throw SyscallError(function: "pthread_create", errno: failure)
        }
    }

    /// A loop over `calls` that reads the time from `clock` (nanoseconds, never going back): the
    /// test kit's, over its simulated kernel.
    public convenience init(calls: SystemCalls, clock: @escaping @Sendable () -> UInt64) throws {
        do throws(SyscallError) {
            try self.init(system: System(calls), clock: clock)
        } catch {
            throw DirectoryWatcherError(error, path: FileSystemPath("/"))
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
                inotifyFD, path: FileSystemPath("/proc/self/fd/\(fd)"), mask: EventMask.attributes)
            return (fd, wd)
        } catch {
            system.close(fd)
            throw error
        }
    }

    // MARK: - Leading

    /// Leads until the loop stops (true: this thread closed it) or a standby takes the lead from a
    /// callback running on this thread (false).
    func lead() -> Bool {
        while running {
            var timeout = readyHead < ready.count ? 0 : timeoutNanoseconds()
            var count = 0
            var waited: UInt64 = 0
            var paused = false
            if let pause = pacing.pauseBefore(timeout: timeout) {
                // Under a stream of events: a moment for the next ones to gather, then whatever
                // came, without sleeping again.
                System.sleep(nanoseconds: pause)
                pausesTaken &+= 1
                paused = true
                count = wait(timeoutNanoseconds: 0)
                if count == 0 {
                    pacing.pauseFoundNothing()
                    timeout = timeoutNanoseconds()
                }
            }
            if count == 0 {
                let began = clock()
                count = wait(timeoutNanoseconds: timeout)
                waited = clock() &- began
            }
            // One clock reading per wake-up serves its reads, the router's deadlines and the
            // delivery's time slice: each reading costs about as much as routing an event, and
            // what happens in a wake-up is microseconds apart.
            let now = clock()
            eventsRead = 0
            // The mount table first: a barrier asked for after a mount was made, read or handled
            // in this wake-up, completes after what the mount means. What was queued before the
            // change is routed before it.
            for index in 0..<count where tokens[index] == Token.mountTable {
                readEvents(now: now)
                readFanotifyEvents(now: now, untilDrained: false)
                router.mountTableChanged(now: now)
            }
            for index in 0..<count {
                switch tokens[index] {
                case Token.inotify: readEvents(now: now)
                case Token.fanotify: readFanotifyEvents(now: now, untilDrained: false)
                case Token.wake: for task in inbox.take() { task(self) }
                default: break  // (the mount table's, above)
                }
            }
            router.expire(now: now)
            router.finishWakeUp(queueDrained: queueDrained && fanotifyDrained)
            router.takeReady(into: &ready)
            pacing.wokeUp(waited: waited, events: eventsRead, afterPause: paused)
            guard deliverReady(started: now) else { return false }
            // A save waits for its watcher's deliveries: those of this wake-up are done.
            router.takeDueSaves()
        }
        tearDown()
        return true
    }

    /// `epoll_wait` on the loop's set, into ``tokens``: how many descriptors are ready.
    private func wait(timeoutNanoseconds timeout: Int64) -> Int {
        do {
            return try system.epollWait(
                epollFD, tokens: tokens, events: readiness, max: Int32(Self.readyAtOnce), timeoutNanoseconds: timeout)
        } catch {
            preconditionFailure("epoll_wait failed: \(error)")
        }
    }

    /// Until the router's next deadline, to the nanosecond: a settled batch is due a quiet period
    /// after the last change, and a millisecond's rounding would be most of what the library
    /// adds to it.
    private func timeoutNanoseconds() -> Int64 {
        guard let deadline = router.deadline else { return -1 }
        let now = clock()
        if deadline <= now { return 0 }
        return Int64(clamping: deadline - now)
    }

    /// Reads and routes what the kernel has queued, as a wake-up would (a task: the loop's
    /// leader); the batches go out at the end of the wake-up.
    func readQueuedEvents() {
        let now = clock()
        readEvents(now: now)
        readFanotifyEvents(now: now, untilDrained: false)
    }

    /// Whether the last reads found the kernel queues empty.
    var isDrained: Bool { queueDrained && fanotifyDrained }

    /// Reads and routes the fanotify group's events, as ``readEvents(now:)`` reads inotify's;
    /// `untilDrained`: however many reads it takes to empty the queue (a barrier's).
    private func readFanotifyEvents(now: UInt64, untilDrained: Bool) {
        guard fanotifyFD >= 0 else { return }
        var reads = 0
        // What was queued when the barrier asked is at most the queue's capacity: past that many
        // events, whatever is read was queued after (a busy file system may never leave it empty).
        var budget = untilDrained ? fanotifyQueueCapacity + 1 : 0
        // (A record routed may end the last tree, which closes the group: the next read is not made.)
        while fanotifyFD >= 0, untilDrained ? budget > 0 : reads < Self.readsPerWakeUp {
            reads += 1
            let count: Int?
            do {
                count = try system.read(fanotifyFD, into: buffer)
            } catch {
                router.receive(MarkEvent(mask: MarkBits.queueOverflow), now: now)
                return
            }
            guard let count, count > 0 else {
                fanotifyDrained = true
                return
            }
            // Parsed into the arrays the loop keeps, moved to locals (a property passed as an
            // argument is retained and released around the call).
            var events: [MarkEvent] = []
            swap(&events, &parsedMarkEvents)
            let isMalformed = FanotifyEventParser.parse(
                UnsafeRawBufferPointer(rebasing: buffer[..<count]), copyingInto: &fanotifyCopy, appendingTo: &events,
                descriptors: &openedDescriptors)
            if !openedDescriptors.isEmpty {
                for fd in openedDescriptors { system.close(fd) }
                openedDescriptors.removeAllKeepingCapacity()
            }
            // Each record is lent to the router without a copy (``Array/lendEach(_:)``).
            events.lendEach { router.receive($0, now: now) }
            budget -= events.count
            eventsRead &+= events.count
            events.removeAllKeepingCapacity()
            swap(&events, &parsedMarkEvents)
            if isMalformed { router.receive(MarkEvent(mask: MarkBits.queueOverflow), now: now) }
            // A record is at most a few hundred bytes (two handles and two names).
            fanotifyDrained = count <= Self.readBufferSize - Self.largestFanotifyRecord
            if fanotifyDrained { return }
        }
    }

    /// Stops reading the inotify queue (`held`), or reads it again. Leader only.
    func holdReading(_ held: Bool) {
        guard inotifyFD >= 0, held != readingHeld else { return }
        readingHeld = held
        do throws(SyscallError) {
            if held {
                try system.epollRemove(epollFD, fd: inotifyFD)
            } else {
                try system.epollAdd(epollFD, fd: inotifyFD, token: Token.inotify)
            }
        } catch {
            preconditionFailure("epoll_ctl of the inotify descriptor failed: \(error)")
        }
    }

    private func readEvents(now: UInt64) {
        // No inotify: only polled watchers, nothing to read. Held: nothing read until released.
        guard inotifyFD >= 0, !readingHeld else { return }
        for _ in 0..<Self.readsPerWakeUp {
            let count: Int?
            do {
                count = try system.read(inotifyFD, into: buffer)
            } catch {
                // No read error is expected from inotify with this buffer size; report the
                // changes as possibly lost rather than trusting a partial picture.
                router.receive(Router.lossMarker, now: now)
                return
            }
            guard let count, count > 0 else {
                queueDrained = true
                return
            }
            // The events are lent from a local: a property passed as an argument is retained
            // and released around the call (the callee could change the property meanwhile).
            var events: [BackendEvent] = []
            swap(&events, &parsedEvents)
            let malformed = InotifyEventParser.parse(
                UnsafeRawBufferPointer(rebasing: buffer[..<count]), copyingInto: &readCopy, appendingTo: &events)
            router.receive(events, now: now)
            eventsRead &+= events.count
            events.removeAllKeepingCapacity()
            swap(&events, &parsedEvents)
            if malformed != 0 { router.receive(Router.lossMarker, now: now) }
            // The kernel fills a read with every queued event that fits: room left for the largest
            // record means nothing was left, and a second read would only find the queue empty.
            queueDrained = count <= Self.readBufferSize - Self.largestRecord
            if queueDrained { return }
        }
    }

    /// The loop is stopping. What is still to be delivered goes to Dispatch: the thread that
    /// stops the loop may be waiting for these descriptors to close, and a callback run here
    /// could be waiting for that thread.
    private func tearDown() {
        router.tearDown()
        router.takeReady(into: &ready)
        for mailbox in ready[readyHead...] {
            DispatchQueue.global().async { CallbackContext.run { mailbox.drain() } }
        }
        ready = []
        inbox.close()
        // Closing the inotify descriptor removes every kernel watch of this instance.
        for fd in [epollFD, inbox.wakeFD, barrierFD, inotifyFD, fanotifyFD, mountTableFD] where fd >= 0 {
            system.close(fd)
        }
        threads.close()
        inbox.markExited()
    }

}
