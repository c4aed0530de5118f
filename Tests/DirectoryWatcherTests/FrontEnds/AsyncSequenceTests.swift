import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The async sequence: order, ending, buffering, a consumer that falls behind, cancelling. The
/// long runs (100,000 files at each buffer limit, more cancelled iterations) are in
/// ``AsyncSequenceStressTests``.
class AsyncSequenceTests: WatchedDirectoryTestCase {
    var scale: Scale { .fast }

    /// A sequence's end never waits for its loop's threads (a Dispatch worker joins them): the
    /// next test starts once they have exited.
    override func tearDown() {
        SharedEventLoop.waitUntilStopped()
        super.tearDown()
    }

    func testChangesArriveInOrderAndEndWithTheDirectory() async throws {
        let changes = try DirectoryWatcher.changes(path: directory.path)
        XCTAssertEqual(changes.path, FileSystemPath(directory.path))
        let file = directory.touch("one")
        rename(file, directory.url("two"))
        unlink(directory.url("two"))
        rmdir(directory.path)
        var seen: [DirectoryChange] = []
        for await change in changes { seen.append(change) }
        XCTAssertEqual(
            seen,
            [
                DirectoryChange(.created, file),
                DirectoryChange(.renamed, directory.url("two"), from: file),
                DirectoryChange(.removed, directory.url("two")),
                DirectoryChange(.rootRemoved, directory.path, directory: true),
            ])
        XCTAssertEqual(ProcessResources.loopThreads(), 0, "the watch was released before the loop ended")
    }

    /// The sequence takes the watchers' options: settled, a file made, written and renamed is one
    /// creation under its last name, and the removal of the directory ends the sequence at once.
    func testASettledSequenceGivesWhatTheChangesAddUpTo() async throws {
        let changes = try DirectoryWatcher.changes(
            path: directory.path, options: .init(settling: .init(quietPeriod: .milliseconds(50))))
        let file = directory.touch("draft")
        directory.write("draft", "text")
        rename(file, directory.url("final"))
        var iterator = changes.makeAsyncIterator()
        let first = await iterator.next()
        XCTAssertEqual(first, DirectoryChange(.created, directory.url("final")))
        unlink(directory.url("final"))
        rmdir(directory.path)
        var rest: [DirectoryChange] = []
        while let change = await iterator.next() { rest.append(change) }
        XCTAssertEqual(rest, [DirectoryChange(.rootRemoved, directory.path, directory: true)])
    }

    func testCancellingTheConsumerEndsTheWatch() async throws {
        let watchesBefore = ProcessResources.kernelWatches()
        let changes = try DirectoryWatcher.changes(path: directory.path)
        let firstSeen = expectation(description: "first change")
        let consumer = Task {
            var count = 0
            for await _ in changes {
                count += 1
                if count == 1 { firstSeen.fulfill() }
            }
            return count
        }
        directory.touch("a")
        await fulfillment(of: [firstSeen], timeout: 10)
        consumer.cancel()
        _ = await consumer.value
        // The loop's threads are joined by a Dispatch worker: the cancel never waits for them.
        SharedEventLoop.waitUntilStopped()
        XCTAssertEqual(ProcessResources.loopThreads(), 0, "the sequence's watcher was the only one")
        XCTAssertLessThanOrEqual(ProcessResources.kernelWatches(), watchesBefore)
    }

    func testDroppingTheSequenceEndsTheWatch() throws {
        do {
            let changes = try DirectoryWatcher.changes(path: directory.path)
            XCTAssertEqual(ProcessResources.loopThreads(), 1)
            _ = changes
        }
        SharedEventLoop.waitUntilStopped()
        XCTAssertEqual(ProcessResources.loopThreads(), 0)
    }

    func testMissingDirectoryThrows() {
        XCTAssertThrowsError(try DirectoryWatcher.changes(path: "/nonexistent/for/sure")) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .noSuchPath)
        }
    }

    func testTheBufferLimitIsExplicitAndChecked() throws {
        XCTAssertEqual(DirectoryChanges.defaultBufferLimit, 16_384)
        XCTAssertEqual(try DirectoryWatcher.changes(path: directory.path).bufferLimit, 16_384)
        XCTAssertEqual(try DirectoryWatcher.changes(path: directory.path, bufferLimit: 8).bufferLimit, 8)
        XCTAssertThrowsError(try DirectoryWatcher.changes(path: directory.path, bufferLimit: 0)) { error in
            let error = error as? DirectoryWatcherError
            XCTAssertEqual(error?.code, .invalidOption)
            XCTAssertTrue(error?.description.contains("at least 1") ?? false, "\(String(describing: error))")
        }
    }

    /// A consumer that takes nothing while 40 files are made, with room for 8: it gets 8, then a
    /// notice saying 32 were held back, then what they came to (those the watcher still had when
    /// the buffer filled, and the rest, the last 20 among them, found by listing the directory).
    func testASlowConsumerIsToldItFellBehindAndThenReceivesTheRescan() async throws {
        let changes = try DirectoryWatcher.changes(path: directory.path, bufferLimit: 8)
        // A watcher of the same directory: once its barrier completes, the loop has routed every
        // event before it to the sequence's watcher too.
        let probe = try DirectoryWatcher.watchFolder(path: directory.path) { _ in }
        defer { probe.invalidate() }
        let early = (0..<20).map { directory.touch("early-\($0)") }
        await probe.barrier()
        // The buffer is full and the watcher owes a catch-up: these are dropped, to be listed.
        let late = (0..<20).map { directory.touch("late-\($0)") }
        await probe.barrier()

        var seen: [DirectoryChange] = []
        var iterator = changes.makeAsyncIterator()
        let expected = Set((early + late).map { FileSystemPath($0) })
        while Set(seen.filter { $0.kind == .created }.map(\.path)) != expected {
            guard let change = await iterator.next() else { break }
            seen.append(change)
        }
        let notice = try XCTUnwrap(seen.firstIndex { $0.kind == .overflow }, "told it fell behind: \(seen)")
        XCTAssertEqual(notice, 8, "the buffer's 8 first")
        XCTAssertEqual(seen[..<notice].map(\.path), early.prefix(8).map { FileSystemPath($0) }, "in order")
        XCTAssertEqual(seen[notice].droppedChanges, 32, "how many were held back")
        XCTAssertEqual(seen.filter { $0.kind == .overflow }.count, 1)
        let found = Set(seen.filter(\.foundByRescan).map(\.path))
        XCTAssertTrue(Set(late.map { FileSystemPath($0) }).isSubset(of: found), "the rescan reports the rest")
        XCTAssertFalse(seen[..<notice].contains(where: \.foundByRescan))
        XCTAssertEqual(seen.filter { $0.kind == .created }.count, 40, "each file once")

        // Caught up: changes flow as before.
        let after = directory.touch("after")
        let next = await iterator.next()
        XCTAssertEqual(next, DirectoryChange(.created, after))
    }

    // MARK: - Each change once, however far behind

    /// 2,000 files (100,000 in the stress suite) with room for one.
    func testASlowConsumerGetsEachChangeOnceWithABufferOf1() async throws {
        try await slowConsumerGetsEachChangeOnce(bufferLimit: 1)
    }

    /// With room for 8.
    func testASlowConsumerGetsEachChangeOnceWithABufferOf8() async throws {
        try await slowConsumerGetsEachChangeOnce(bufferLimit: 8)
    }

    /// With room for 100.
    func testASlowConsumerGetsEachChangeOnceWithABufferOf100() async throws {
        try await slowConsumerGetsEachChangeOnce(bufferLimit: 100)
    }

    /// With the default room, 16,384: a consumer falls that far behind only in the stress suite's
    /// 100,000 files.
    func testASlowConsumerGetsEachChangeOnceWithTheDefaultBuffer() async throws {
        try XCTSkipIf(scale == .fast, "2,000 files never fill 16,384: the stress suite's")
        try XCTSkipIf(
            ProcessInfo.processInfo.environment["DIRWATCH_SANITIZED"] == "1",
            "under a sanitizer, 20,000 files never fill 16,384: the plain stress run's (100,000)")
        try await slowConsumerGetsEachChangeOnce(bufferLimit: DirectoryChanges.defaultBufferLimit)
    }

    /// A tree, watched through inotify, its 2,000 files (20,000 in the stress suite) made in two
    /// directories below the root, with room for 8: each catch-up reports every directory of the tree from what the consumer knew
    /// of it (before the fix, only the first directory listed: the other's files made while the
    /// consumer was behind were never reported).
    func testASlowConsumerOfAnInotifyTreeGetsEachChangeOnce() async throws {
        try await slowConsumerGetsEachChangeOnce(bufferLimit: 8, tree: .inotify)
    }

    /// The same tree watched through fanotify, where the process may use it.
    func testASlowConsumerOfAFanotifyTreeGetsEachChangeOnce() async throws {
        try XCTSkipUnless(geteuid() == 0, "fanotify's file-system mark needs CAP_SYS_ADMIN")
        try await slowConsumerGetsEachChangeOnce(bufferLimit: 8, tree: .fanotify)
    }

    /// A settling watcher (a quiet period of 1 ms, batches held up to 20 ms) with room for 8:
    /// its settled batches overflow the buffer, and what its settler holds when they do is
    /// neither lost nor repeated by the catch-up.
    func testASlowConsumerOfASettlingWatcherGetsEachChangeOnce() async throws {
        try await slowConsumerGetsEachChangeOnce(
            bufferLimit: 8, settling: .init(quietPeriod: .milliseconds(1), maximumWait: .milliseconds(20)))
    }

    /// A writer makes `files` files, then a sentinel, while a consumer takes changes at half the
    /// writer's pace (the writer's progress gates it: no sleep), so it falls behind, is told so,
    /// and catches up, again and again. The writer waits for a barrier after each burst of files,
    /// so the loop finds the kernel queue empty at the end of a wake-up that read the burst's last
    /// events: where a catch-up that is due runs (before the fix, it delivered those events and
    /// then found their files again: a burst's worth of changes twice). The consumer applies
    /// every change (the notices and what the listings found included) to a model of the
    /// directory: no name is created twice, and once it has seen the sentinel and then a last
    /// file made after it, the model is the directory's listing.
    private func slowConsumerGetsEachChangeOnce(
        bufferLimit: Int, tree backend: DirectoryWatcher.Backend? = nil,
        settling: DirectoryWatcher.Settling? = nil
    ) async throws {
        // Under a sanitizer (.ci/run says so), 20,000: still past the default buffer, and a
        // consumer at half the writer's pace under ThreadSanitizer took more than 180 s for 100,000.
        // A tree's catch-ups list every directory: 20,000 files are enough for the stress suite.
        let sanitized = ProcessInfo.processInfo.environment["DIRWATCH_SANITIZED"] == "1"
        let files = scale == .fast ? 2_000 : (sanitized || backend != nil || settling != nil) ? 20_000 : 100_000
        let burst = scale == .stress ? 1_000 : 100
        // A memory file system where there is one: 100,000 creations.
        let parent = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        let directory = TemporaryDirectory(in: parent)
        // In a tree, the files go to two directories made before the watch, once the birth clock
        // has ticked past them (else their listing cannot tell they are the same directories).
        let folders = backend == nil ? [""] : ["a/", "b/"]
        if backend != nil {
            for folder in folders { directory.mkdir(String(folder.dropLast())) }
            RescanTests.waitForTheBirthClockToTick()
        }
        var options = backend.map { DirectoryWatcher.Options(recursive: true, backend: $0) } ?? .init()
        options.settling = settling
        let changes = try DirectoryWatcher.changes(path: directory.path, options: options, bufferLimit: bufferLimit)
        // A watcher of the same directory: once its barrier completes, the loop has routed every
        // event before it, and found the kernel queue empty.
        let probe = try DirectoryWatcher.watchFolder(path: directory.path) { _ in }
        defer { probe.invalidate() }
        let progress = WriterProgress()
        Thread {
            let routed = DispatchSemaphore(value: 0)
            for index in 0..<files {
                directory.touch(folders[index % folders.count] + "f-\(index)")
                if index % 64 == 63 { progress.advance(to: index + 1) }
                if index % burst == burst - 1 {
                    probe.barrier { routed.signal() }
                    routed.wait()
                }
            }
            directory.touch("sentinel")
            progress.finish()
        }.start()

        let sentinel = FileSystemPath(directory.url("sentinel"))
        let last = FileSystemPath(directory.url("last"))
        let finished = expectation(description: "the last file seen")
        let consumer = Task { () -> Model in
            defer { finished.fulfill() }
            var model = Model()
            for folder in folders where !folder.isEmpty {
                model.names.insert(FileSystemPath(directory.url(String(folder.dropLast()))))
            }
            var iterator = changes.makeAsyncIterator()
            while !model.names.contains(last) {
                await progress.reached(model.taken * 2)
                guard let change = await iterator.next() else { break }
                model.apply(change)
                // Made once the sentinel is seen, so after every change before the sentinel was
                // handed over: once this one comes (by its event or a catch-up's listing),
                // nothing is left to come.
                if change.path == sentinel && change.kind == .created { directory.touch("last") }
            }
            return model
        }
        // A bound for a hang (a change lost, never seen), not a latency.
        await fulfillment(of: [finished], timeout: 180)
        consumer.cancel()
        let model = await consumer.value

        let context = "buffer \(bufferLimit), \(files) files: \(model.summary)"
        XCTAssertEqual(model.repeated.count, 0, "changes delivered twice: \(model.repeated.prefix(10)); \(context)")
        XCTAssertEqual(model.inconsistent.count, 0, "\(model.inconsistent.prefix(10)); \(context)")
        let listing = Set(
            try FileManager.default.subpathsOfDirectory(atPath: directory.path).map {
                FileSystemPath(directory.url($0))
            })
        XCTAssertEqual(listing.count, files + 2 + folders.filter { !$0.isEmpty }.count)
        XCTAssertEqual(model.names.subtracting(listing).count, 0, "reported, not on disk; \(context)")
        XCTAssertEqual(listing.subtracting(model.names).count, 0, "on disk, never reported; \(context)")
        XCTAssertGreaterThan(model.notices, 0, "the consumer fell behind: \(context)")
        XCTAssertEqual(model.failedNotices, 0, context)
    }

    /// What a consumer was told, applied to the names of the directory.
    private struct Model {
        var names: Set<FileSystemPath> = []
        var taken = 0
        var notices = 0
        var failedNotices = 0
        var found = 0
        /// A name created that the model had, or removed that it did not have.
        var repeated: [DirectoryChange] = []
        /// A rename from a name the model did not have.
        var inconsistent: [DirectoryChange] = []

        mutating func apply(_ change: DirectoryChange) {
            taken += 1
            if change.foundByRescan { found += 1 }
            switch change.kind {
            case .created, .movedIn:
                if !names.insert(change.path).inserted { repeated.append(change) }
            case .removed, .movedOut:
                if names.remove(change.path) == nil { repeated.append(change) }
            case .renamed:
                if let old = change.oldPath, names.remove(old) == nil { inconsistent.append(change) }
                names.insert(change.path)
            case .overflow:
                notices += 1
            case .failed:
                failedNotices += 1
            default:
                break
            }
        }

        var summary: String {
            "\(taken) changes taken, \(notices) notices, \(found) found by listings, "
                + "\(repeated.count) repeated, \(names.count) names"
        }
    }

    // MARK: - Cancelling

    /// 3 iterations (10 in the stress suite), each cancelled while a writer makes and removes
    /// files without a pause and the consumer, taking one change for every four files made and
    /// removed, is thousands of changes behind: the loop ends within 50 ms of the cancel (the
    /// median; every one within a second), handing out at most the change it was taking when the
    /// cancel came, and the watches are released (before the fix: hundreds of milliseconds, and
    /// hundreds to thousands of buffered changes handed out after the cancel).
    func testACancelledIterationEndsAtOnceUnderANonstopWriter() async throws {
        let rounds = scale == .stress ? 10 : 3
        var latencies: [Duration] = []
        for _ in 0..<rounds {
            let (latency, afterCancel) = try await cancelUnderANonstopWriter()
            XCTAssertLessThanOrEqual(afterCancel, 1, "changes handed out after the cancel")
            XCTAssertLessThan(latency, .seconds(1))
            latencies.append(latency)
        }
        let median = latencies.sorted()[latencies.count / 2]
        XCTAssertLessThan(median, .milliseconds(50), "from the cancel to the loop's end: \(latencies)")
        // The loop's threads are joined by a Dispatch worker: the cancel never waits for them.
        SharedEventLoop.waitUntilStopped()
        XCTAssertEqual(ProcessResources.loopThreads(), 0, "every cancelled sequence released its watch")
    }

    /// One cancelled iteration: how long from the cancel to the end of the loop, and how many
    /// changes the loop got after the cancel.
    private func cancelUnderANonstopWriter() async throws -> (Duration, Int) {
        let parent = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        let directory = TemporaryDirectory(in: parent)
        let changes = try DirectoryWatcher.changes(path: directory.path)
        let progress = WriterProgress()
        let stop = LockedValue(false)
        let writerDone = expectation(description: "the writer stopped")
        Thread {
            var index = 0
            while !stop.get() {
                let name = "f-\(index % 1_000)"
                directory.touch(name)
                unlink(directory.url(name))
                index += 1
                if index % 64 == 0 { progress.advance(to: index) }
            }
            progress.finish()
            writerDone.fulfill()
        }.start()

        let clock = ContinuousClock()
        let cancelledAt = LockedValue<ContinuousClock.Instant?>(nil)
        let behind = expectation(description: "the consumer is behind")
        let consumer = Task { () -> (ContinuousClock.Instant, Int) in
            var taken = 0
            var afterCancel = 0
            for await _ in changes {
                // Handed out once the task was cancelled (not once the test noted the time: the
                // consumer may take another change between the two).
                if Task.isCancelled { afterCancel += 1 }
                taken += 1
                // 500 changes taken: the writer has made 2,000 files and removed them, 4,000
                // changes, and thousands wait in the buffer.
                if taken == 500 { behind.fulfill() }
                await progress.reached(taken * 4)
            }
            return (clock.now, afterCancel)
        }
        await fulfillment(of: [behind], timeout: 180)
        cancelledAt.set(clock.now)
        consumer.cancel()
        let (ended, afterCancel) = await consumer.value
        stop.set(true)
        await fulfillment(of: [writerDone], timeout: 180)
        return (ended - cancelledAt.get()!, afterCancel)
    }
}

/// How far a writer thread has got: a consumer paces itself by it, waiting for the writer's
/// count to reach a mark (an event, never a time). Once the writer has finished, every mark is
/// reached; a waiting task that is cancelled stops waiting, as a consumer's cancellable work would.
private final class WriterProgress: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    private var finished = false
    private var nextWaiter = 0
    private var waiters: [(id: Int, mark: Int, continuation: CheckedContinuation<Void, Never>)] = []

    /// The writer has made `count` changes.
    func advance(to count: Int) {
        let due = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            self.count = count
            return takeWaiters { waiter in waiter.mark <= count }
        }
        for continuation in due { continuation.resume() }
    }

    /// The writer has stopped.
    func finish() {
        let due = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            finished = true
            return takeWaiters { _ in true }
        }
        for continuation in due { continuation.resume() }
    }

    /// Returns once the writer has made `mark` changes, or stopped, or the task is cancelled.
    func reached(_ mark: Int) async {
        let id = lock.withLock { () -> Int in
            nextWaiter += 1
            return nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = lock.withLock { () -> Bool in
                    if finished || count >= mark || Task.isCancelled { return true }
                    waiters.append((id, mark, continuation))
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let due = lock.withLock { takeWaiters { waiter in waiter.id == id } }
            for continuation in due { continuation.resume() }
        }
    }

    /// Under the lock.
    private func takeWaiters(
        _ isDue: ((id: Int, mark: Int, continuation: CheckedContinuation<Void, Never>)) -> Bool
    ) -> [CheckedContinuation<Void, Never>] {
        var due: [CheckedContinuation<Void, Never>] = []
        waiters.removeAll { waiter in
            guard isDue(waiter) else { return false }
            due.append(waiter.continuation)
            return true
        }
        return due
    }
}
