import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Teardown under fire: the loop stopping while other threads hand it work, watchers invalidated
/// from each other's callbacks, async sequences ended while changes flow. Each test is bounded:
/// a deadlock fails it through an expectation's timeout rather than hanging the suite.
class TeardownTests: WatchedDirectoryTestCase {
    /// A hundred cycles here; a thousand (and 300 loops) in the stress suite.
    var scale: Scale { .fast }

    // MARK: - Descriptors the library no longer owns

    /// An app thread opens files while watchers come and go; the loop's eventfd, once closed, is
    /// the number the app's next file gets. None of the app's files may ever be written to.
    func testCyclesWhileTheAppOpensFilesNeverWriteIntoThem() throws {
        let stop = LockedValue(false)
        let written = LockedValue(0)
        let opened = LockedValue(0)
        // The app works in the watched directory, so the loop is awake, reading its events, when
        // a task arrives: the moment the eventfd used to be written after the lock was let go.
        let appFile = directory.url("app-file")
        let appExited = DispatchSemaphore(value: 0)
        let app = Thread {
            while !stop.get() {
                let fd = open(appFile, O_RDWR | O_CREAT | O_TRUNC, 0o644)
                precondition(fd >= 0)
                for _ in 0..<20 { sched_yield() }  // hold the number a moment, as an app would
                var info = stat()
                fstat(fd, &info)
                close(fd)
                opened.update { $0 += 1 }
                if info.st_size != 0 { written.update { $0 += 1 } }
            }
            appExited.signal()
        }
        app.start()
        defer {
            stop.set(true)
            appExited.wait()  // before tearDown removes the directory it works in
        }
        let recorder = Recorder()
        // The process's only watcher, made and dropped: the loop starts and stops every cycle
        // while this thread and a barrier hand it tasks.
        for _ in 0..<(scale == .stress ? 1_000 : 100) {
            let watcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: recorder)
            watcher.barrier {}
            watcher.invalidate()
        }
        XCTAssertGreaterThan(opened.get(), 0)
        XCTAssertEqual(written.get(), 0, "the library wrote into a file the app had opened")
    }

    /// The same race made visible through the syscall table: every call on a descriptor the loop
    /// has closed is recorded (and not made). Writes to the eventfd are slowed to widen the window
    /// between a task entering the inbox and the loop being woken.
    func testNoCallReachesADescriptorAfterTheLoopClosedIt() throws {
        let tracker = DescriptorTracker()
        for _ in 0..<(scale == .stress ? 300 : 40) {
            let loop = try EventLoop(system: tracker.system)
            let watcher = try DirectoryWatcher.make(
                path: directory.path, delegate: Recorder(), queue: nil, loop: loop)
            let group = DispatchGroup()
            DispatchQueue.global().async(group: group) {
                for _ in 0..<5 { watcher.barrier {} }
            }
            DispatchQueue.global().async(group: group) {
                watcher.invalidate()
                loop.shutdown()
            }
            XCTAssertEqual(group.wait(timeout: .now() + 20), .success)
            loop.waitUntilExited()
        }
        XCTAssertEqual(tracker.violations, [], "calls on descriptors the loop had closed")
        XCTAssertEqual(tracker.openCount, 0, "every descriptor the loops opened was closed")
    }

    /// The last watcher invalidated inside a callback delivered on the loop thread: the loop
    /// cannot join itself, so it is detached, and still closes everything it opened.
    func testLastWatcherLeavingFromItsLoopThreadCallbackReleasesEverything() throws {
        let descriptors = ProcessResources.openDescriptors()
        for round in 0..<50 {
            let left = expectation(description: "invalidated inside the callback")
            let recorder = Recorder()
            recorder.onBatch = { watcher, _ in
                watcher.invalidate()
                left.fulfill()
            }
            let watcher = try DirectoryWatcher.watchFolder(
                path: directory.path, options: .init(delivery: .eventLoopThread), delegate: recorder)
            directory.touch("f\(round)")
            wait(for: [left], timeout: 10)
            XCTAssertFalse(watcher.isValid)
            SharedEventLoop.waitUntilStopped()
        }
        XCTAssertEqual(ProcessResources.loopThreads(), 0)
        XCTAssertEqual(ProcessResources.openDescriptors(), descriptors)
    }

    // MARK: - invalidate() never deadlocks

    /// Two watchers whose callbacks run at the same time, each invalidating the other. Waiting
    /// for each other's callback would deadlock; neither may wait.
    func testWatchersInvalidatingEachOtherFromTheirCallbacks() throws {
        let serialA = DispatchQueue(label: "caller A")
        let serialB = DispatchQueue(label: "caller B")
        let concurrent = DispatchQueue(label: "caller concurrent", attributes: .concurrent)
        let modes: [(String, DispatchQueue?, DispatchQueue?)] = [
            ("the library's threads (the default)", nil, nil),
            ("the callers' serial queues", serialA, serialB),
            ("one concurrent queue", concurrent, concurrent),
        ]
        for (name, queueA, queueB) in modes {
            for _ in 0..<5 {
                try crossInvalidate(queueA: queueA, queueB: queueB, name: name)
            }
        }
        // Private Dispatch queues (Delivery.queue), as the first releases delivered.
        for _ in 0..<5 {
            try crossInvalidate(
                queueA: nil, queueB: nil, optionsA: .init(delivery: .queue), optionsB: .init(delivery: .queue),
                name: "private Dispatch queues")
        }
    }

    /// Watcher A is made first, so the loop hands A's batch to its queue before it calls B on the
    /// loop thread (when B delivers there): the two callbacks can meet.
    private func crossInvalidate(
        queueA: DispatchQueue?, queueB: DispatchQueue?, optionsA: DirectoryWatcher.Options = .init(),
        optionsB: DirectoryWatcher.Options = .init(), name: String
    ) throws {
        let watchers = LockedValue<[DirectoryWatcher]>([])
        let arrivedA = DispatchSemaphore(value: 0)
        let arrivedB = DispatchSemaphore(value: 0)
        let returned = expectation(description: "both callbacks returned (\(name))")
        returned.expectedFulfillmentCount = 2
        let met = LockedValue(0)
        func delegate(index: Int, mine: DispatchSemaphore, theirs: DispatchSemaphore) -> Recorder {
            let recorder = Recorder()
            recorder.onFirstBatch { _, _ in
                // Meet inside both callbacks, so each invalidation finds the other one running.
                mine.signal()
                if theirs.wait(timeout: .now() + 10) == .success { met.update { $0 += 1 } }
                watchers.get()[1 - index].invalidate()
                returned.fulfill()
            }
            return recorder
        }
        let recorderA = delegate(index: 0, mine: arrivedA, theirs: arrivedB)
        let recorderB = delegate(index: 1, mine: arrivedB, theirs: arrivedA)
        let a = try DirectoryWatcher.watchFolder(
            path: directory.path, options: optionsA, delegate: recorderA, queue: queueA)
        let b = try DirectoryWatcher.watchFolder(
            path: directory.path, options: optionsB, delegate: recorderB, queue: queueB)
        watchers.set([a, b])
        directory.touch("both-see-it")
        wait(for: [returned], timeout: 20)
        XCTAssertEqual(met.get(), 2, "the callbacks ran at the same time (\(name))")
        XCTAssertFalse(a.isValid)
        XCTAssertFalse(b.isValid)
        watchers.set([])
    }

    /// A queue watcher and a loop-thread watcher invalidating each other from callbacks that run
    /// at the same time.
    func testLoopThreadAndQueueWatchersInvalidatingEachOther() throws {
        for _ in 0..<10 {
            try crossInvalidate(
                queueA: nil, queueB: nil, optionsA: .init(delivery: .queue),
                optionsB: .init(delivery: .eventLoopThread),
                name: "loop thread and queue")
        }
    }

    /// Invalidating itself inside its callback while changes keep coming, in every delivery mode:
    /// the callback returns, and no callback of that watcher starts afterwards.
    func testInvalidatingInsideTheCallbackUnderAStreamInEveryDeliveryMode() throws {
        let callerQueue = DispatchQueue(label: "caller")
        let concurrent = DispatchQueue(label: "caller concurrent", attributes: .concurrent)
        let modes: [(String, DirectoryWatcher.Options, DispatchQueue?)] = [
            ("the library's threads (the default)", .init(), nil),
            ("private Dispatch queue", .init(delivery: .queue), nil),
            ("caller's serial queue", .init(), callerQueue),
            ("caller's concurrent queue", .init(), concurrent),
            ("loop thread", .init(delivery: .eventLoopThread), nil),
        ]
        // Keeps the loop running across rounds, and records nothing.
        let keeper = try DirectoryWatcher.watchFolder(path: directory.path) { _ in }
        defer { keeper.invalidate() }
        for (name, options, queue) in modes {
            for _ in 0..<10 {
                let writer = try Writer(in: directory, prefix: "s")
                let calls = LockedValue(0)
                let invalidated = expectation(description: "invalidated itself (\(name))")
                let recorder = Recorder()
                recorder.onBatch = { watcher, _ in
                    calls.update { $0 += 1 }
                    watcher.invalidate()
                    invalidated.fulfill()
                }
                let watcher = try DirectoryWatcher.watchFolder(
                    path: directory.path, options: options, delegate: recorder, queue: queue)
                wait(for: [invalidated], timeout: 20)
                writer.stop()
                waitForDelivery(watcher)
                XCTAssertEqual(calls.get(), 1, "no callback after the one that invalidated (\(name))")
            }
        }
    }

    /// From outside callbacks, invalidate() still waits for a callback in progress: when it
    /// returns, that callback has finished.
    func testInvalidateFromOutsideWaitsForTheRunningCallback() throws {
        let blocked = BlockedFirstCallback(expectation(description: "callback started"))
        // Another watcher keeps the loop, so invalidate() has no loop thread to join: only the
        // wait for the callback can hold it up.
        let keeper = try DirectoryWatcher.watchFolder(path: directory.path) { _ in }
        defer { keeper.invalidate() }
        let watcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: blocked.recorder)
        directory.touch("slow")
        wait(for: [blocked.started], timeout: 10)
        // Release the callback only once invalidate() has closed the gate, so it is running
        // while invalidate() decides whether to wait.
        Thread {
            while watcher.isValid { sched_yield() }
            blocked.release.signal()
        }.start()
        watcher.invalidate()
        XCTAssertTrue(blocked.finished.get(), "invalidate() returned while the callback was still running")
    }

    /// A barrier after an invalidation made inside another callback completes only once the
    /// invalidated watcher's running callback has finished.
    func testBarrierAfterANonWaitingInvalidateRunsBehindTheRunningCallback() throws {
        let blocked = BlockedFirstCallback(expectation(description: "B's callback started"))
        let other = TemporaryDirectory()
        let b = try DirectoryWatcher.watchFolder(path: directory.path, delegate: blocked.recorder)
        directory.touch("b")
        wait(for: [blocked.started], timeout: 10)
        let completedAfter = expectation(description: "barrier completion")
        let recorderA = Recorder()
        recorderA.onFirstBatch { _, _ in
            b.invalidate()  // inside A's callback: returns at once
            b.barrier {
                XCTAssertTrue(blocked.finished.get(), "the completion ran before B's callback finished")
                completedAfter.fulfill()
            }
            blocked.release.signal()
        }
        let a = try DirectoryWatcher.watchFolder(path: other.path, delegate: recorderA)
        defer { a.invalidate() }
        other.touch("a")
        wait(for: [completedAfter], timeout: 10)
    }

    // MARK: - Async sequences ended while changes flow

    /// Cancelling the iterating task while changes are being yielded: `cancel()` returns, the
    /// loop ends, and the watch goes.
    func testCancellingIteratingTasksUnderAStreamOfChanges() async throws {
        for round in 0..<40 {
            let writer = try Writer(in: directory, prefix: "c")
            defer { writer.stop() }
            let changes = try DirectoryWatcher.changes(path: directory.path)
            let seen = expectation(description: "changes are flowing")
            // Every other round the task cancels itself just after receiving a change, when the
            // delivery is most likely still yielding the rest of that batch.
            let cancelsItself = round % 2 == 1
            let consumer = Task {
                var count = 0
                for await _ in changes {
                    count += 1
                    if count == 50 {
                        seen.fulfill()
                        if cancelsItself { withUnsafeCurrentTask { $0?.cancel() } }
                    }
                }
            }
            await fulfillment(of: [seen], timeout: 20)
            if !cancelsItself {
                // From another thread, so a deadlock in cancel() fails the test instead of hanging it.
                let cancelled = expectation(description: "cancel() returned")
                DispatchQueue.global().async {
                    consumer.cancel()
                    cancelled.fulfill()
                }
                await fulfillment(of: [cancelled], timeout: 20)
            }
            let ended = expectation(description: "the consumer's loop ended")
            Task {
                await consumer.value
                ended.fulfill()
            }
            await fulfillment(of: [ended], timeout: 20)
        }
        SharedEventLoop.waitUntilStopped()
        XCTAssertEqual(ProcessResources.loopThreads(), 0, "every sequence released its watch")
    }

    /// Breaking out of the loop, and dropping a sequence nobody iterates, while changes flow.
    func testBreakingOutAndDroppingUnderAStreamOfChanges() async throws {
        for _ in 0..<20 {
            let writer = try Writer(in: directory, prefix: "d")
            defer { writer.stop() }
            var count = 0
            for await _ in try DirectoryWatcher.changes(path: directory.path) {
                count += 1
                if count == 50 { break }
            }
            XCTAssertEqual(count, 50)
            _ = try DirectoryWatcher.changes(path: directory.path)
        }
        SharedEventLoop.waitUntilStopped()
        XCTAssertEqual(ProcessResources.loopThreads(), 0)
    }

    // MARK: - Actor isolation

    /// A delegate isolated to the main actor would be called off the main thread: the protocol
    /// refuses such a conformance when it is compiled.
    func testMainActorIsolatedConformanceIsRefusedAtCompileTime() throws {
        let refused = try typecheck(
            """
            import DirectoryWatcher
            @MainActor final class Model: @MainActor DirectoryWatcherDelegate {
                func directoryDidChange(_ watcher: DirectoryWatcher) {}
            }
            """)
        XCTAssertFalse(refused.succeeded)
        XCTAssertTrue(refused.output.contains("main actor-isolated conformance"), refused.output)

        let implicit = try typecheck(
            """
            import DirectoryWatcher
            @MainActor final class Model: DirectoryWatcherDelegate {
                func directoryDidChange(_ watcher: DirectoryWatcher) {}
            }
            """)
        XCTAssertFalse(implicit.succeeded, "an implicitly isolated conformance is refused too")

        // The documented recipe compiles.
        let recipe = try typecheck(
            """
            import DirectoryWatcher
            @MainActor final class Model: DirectoryWatcherDelegate {
                var watcher: DirectoryWatcher?
                var reloads = 0
                func start(path: String) throws {
                    watcher = try DirectoryWatcher.watchFolder(path: path, delegate: self, queue: .main)
                }
                nonisolated func directoryDidChange(_ watcher: DirectoryWatcher) {
                    MainActor.assumeIsolated { reloads += 1 }
                }
            }
            """)
        XCTAssertTrue(recipe.succeeded, recipe.output)
    }

    /// The recipe for UI code, run: a main-actor class called on the main queue.
    @MainActor
    func testMainActorRecipeIsCalledOnTheMainActor() async throws {
        let model = MainActorModel()
        try model.start(path: directory.path)
        defer { model.watcher?.invalidate() }
        let called = expectation(description: "reloaded on the main actor")
        model.onReload = { called.fulfill() }
        directory.touch("ui")
        await fulfillment(of: [called], timeout: 10)
        XCTAssertGreaterThanOrEqual(model.reloads, 1)
    }

    /// Runs the compiler over `source` against the library built beside this test bundle.
    private func typecheck(_ source: String) throws -> (succeeded: Bool, output: String) {
        let products = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let work = TemporaryDirectory()
        let file = work.url("snippet.swift")
        try source.write(toFile: file, atomically: false, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "swiftc", "-swift-version", "6", "-typecheck", file,
            "-I", products.appendingPathComponent("Modules").path,
            "-Xcc",
            "-fmodule-map-file="
                + products.appendingPathComponent("CDirectoryWatcherShims.build/module.modulemap").path,
            "-module-cache-path", work.url("cache"),
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus == 0, text)
    }
}

/// The UI recipe from DirectoryWatcherDelegate's documentation.
@MainActor
private final class MainActorModel: DirectoryWatcherDelegate {
    var watcher: DirectoryWatcher?
    var reloads = 0
    var onReload: (() -> Void)?

    func start(path: String) throws {
        watcher = try DirectoryWatcher.watchFolder(path: path, delegate: self, queue: .main)
    }

    nonisolated func directoryDidChange(_ watcher: DirectoryWatcher) {
        MainActor.assumeIsolated {
            reloads += 1
            onReload?()
        }
    }
}

/// A syscall table over the live one that records every call made on a descriptor it has seen
/// closed, instead of making it (the number may belong to the app by then).
final class DescriptorTracker: @unchecked Sendable {
    private let lock = NSLock()
    private var open: Set<Int32> = []
    private var recorded: [String] = []

    var violations: [String] { lock.withLock { recorded } }
    var openCount: Int { lock.withLock { open.count } }

    var system: System {
        var calls = SystemCalls.live
        let live = SystemCalls.live
        calls.inotifyInit1 = { [self] flags in opened(live.inotifyInit1(flags)) }
        calls.epollCreate1 = { [self] flags in opened(live.epollCreate1(flags)) }
        calls.eventfd = { [self] initial, flags in opened(live.eventfd(initial, flags)) }
        calls.memfdCreate = { [self] name in opened(live.memfdCreate(name)) }
        calls.openDirectory = { [self] path, noFollow in opened(live.openDirectory(path, noFollow)) }
        calls.write = { [self] fd, buffer, count in
            // Widen the window between a task entering the inbox and the write that wakes the loop.
            for _ in 0..<20 { sched_yield() }
            return using(fd, "write", otherwise: count) { live.write(fd, buffer, count) }
        }
        calls.read = { [self] fd, buffer, count in
            guard let result = using(fd, "read", otherwise: nil, { live.read(fd, buffer, count) }) else {
                errno = EAGAIN  // as if empty: the loop goes on rather than trapping
                return -1
            }
            return result
        }
        calls.futimens = { [self] fd, times in using(fd, "futimens", otherwise: 0) { live.futimens(fd, times) } }
        calls.epollWait = { [self] epfd, tokens, events, max, timeout in
            // Checked before blocking only: holding the lock through the wait would stall closes.
            if !isOpen(epfd) { record("epoll_wait", epfd) }
            return live.epollWait(epfd, tokens, events, max, timeout)
        }
        calls.close = { [self] fd in
            lock.withLock {
                guard open.remove(fd) != nil else {
                    recorded.append("close(\(fd)) of a descriptor not open")
                    return 0
                }
                return live.close(fd)
            }
        }
        return System(calls)
    }

    private func opened(_ fd: Int32) -> Int32 {
        if fd >= 0 { lock.withLock { _ = open.insert(fd) } }
        return fd
    }

    private func isOpen(_ fd: Int32) -> Bool { lock.withLock { open.contains(fd) } }

    private func record(_ call: String, _ fd: Int32) {
        lock.withLock { recorded.append("\(call)(\(fd)) after close") }
    }

    /// Makes the call while holding the lock, so a close cannot slip in between check and call.
    private func using<Result>(_ fd: Int32, _ call: String, otherwise: Result, _ body: () -> Result) -> Result {
        lock.withLock {
            guard open.contains(fd) else {
                recorded.append("\(call)(\(fd)) after close")
                return otherwise
            }
            return body()
        }
    }
}

/// A thread that touches files in a directory until stopped: a stream of changes.
///
/// Paced by a watcher of its own: after every 256 changes it waits for its barrier, so the kernel
/// queue never holds more than a few hundred events. Unpaced, it outruns a loop slowed down by a
/// sanitizer, and every task and barrier then waits behind thousands of events.
final class Writer: Sendable {
    private let stopped = LockedValue(false)
    private let exited = DispatchSemaphore(value: 0)
    private let pacer: DirectoryWatcher

    init(in directory: TemporaryDirectory, prefix: String) throws {
        pacer = try DirectoryWatcher.watchFolder(path: directory.path) { _ in }
        let (stopped, exited, pacer) = (stopped, exited, pacer)
        Thread {
            var index = 0
            let delivered = DispatchSemaphore(value: 0)
            while !stopped.get() {
                directory.touch("\(prefix)\(index % 64)")
                index += 1
                if index % 256 == 0 {
                    pacer.barrier { delivered.signal() }
                    delivered.wait()
                }
            }
            exited.signal()
        }.start()
    }

    /// Stops the writer; returns once it has made its last change. Call once.
    func stop() {
        stopped.set(true)
        exited.wait()
        pacer.invalidate()
    }
}

/// A recorder whose first callback signals `started`, then blocks until `release` is signalled,
/// then sets `finished`: a callback caught in progress.
final class BlockedFirstCallback: Sendable {
    let recorder = Recorder()
    let started: XCTestExpectation
    let release = DispatchSemaphore(value: 0)
    let finished = LockedValue(false)

    init(_ started: XCTestExpectation) {
        self.started = started
        let (release, finished) = (release, finished)
        recorder.onFirstBatch { _, _ in
            started.fulfill()
            release.wait()
            finished.set(true)
        }
    }
}
