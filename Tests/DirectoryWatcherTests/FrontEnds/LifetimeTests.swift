import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Invalidation, ownership and resource use: what an app ported from the sample relies on.
class LifetimeTests: WatchedDirectoryTestCase {
    /// Hundreds of cycles here; thousands in the stress suite.
    var scale: Scale { .fast }

    func testInvalidateIsIdempotentAndStopsDelivery() throws {
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
        XCTAssertTrue(watcher.isValid)
        watcher.invalidate()
        watcher.invalidate()
        XCTAssertFalse(watcher.isValid)
        directory.touch("after")
        XCTAssertEqual(delivered(), [])
    }

    func testNoCallbackStartsAfterInvalidateReturns() throws {
        let invalidated = LockedValue(false)
        let lateCallbacks = LockedValue(0)
        let recorder = Recorder()
        recorder.onBatch = { _, _ in if invalidated.get() { lateCallbacks.update { $0 += 1 } } }
        let watcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: recorder)
        let firstBatch = expectation(description: "changes are flowing")
        firstBatch.assertForOverFulfill = false
        let flowing = Recorder()
        flowing.onBatch = { _, _ in firstBatch.fulfill() }
        let probe = try DirectoryWatcher.watchFolder(path: directory.path, delegate: flowing)
        defer { probe.invalidate() }

        let stopWriting = LockedValue(false)
        let target = directory!
        let writer = Thread {
            var index = 0
            while !stopWriting.get() {
                target.touch("f\(index % 50)")
                index += 1
            }
        }
        writer.start()
        wait(for: [firstBatch], timeout: 10)
        watcher.invalidate()
        invalidated.set(true)
        stopWriting.set(true)
        waitForDelivery(probe)
        XCTAssertEqual(lateCallbacks.get(), 0)
    }

    func testInvalidateInsideTheCallbackDoesNotHang() throws {
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
        let called = expectation(description: "first batch")
        recorder.onBatch = { watcher, _ in
            watcher.invalidate()
            XCTAssertFalse(watcher.isValid)
            called.fulfill()
        }
        directory.touch("one")
        wait(for: [called], timeout: 10)
        directory.touch("two")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.batches, 1)
        XCTAssertEqual(recorder.didChangeCount, 0, "directoryDidChange is not called once invalidated")
    }

    func testInvalidateFromEightThreadsAtOnce() throws {
        for round in 0..<20 {
            let recorder = Recorder()
            let watcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: recorder)
            directory.touch("r\(round)")
            DispatchQueue.concurrentPerform(iterations: 8) { _ in watcher.invalidate() }
            XCTAssertFalse(watcher.isValid)
        }
    }

    func testWatcherDoesNotKeepItsDelegateAlive() throws {
        weak var weakDelegate: Recorder?
        let watcher: DirectoryWatcher
        do {
            let recorder = Recorder()
            watcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: recorder)
            weakDelegate = recorder
        }
        XCTAssertNil(weakDelegate)
        XCTAssertNil(watcher.delegate)
        directory.touch("nobody-listens")
        waitForDelivery(watcher)  // delivering to a missing delegate is a no-op, not a crash
        watcher.invalidate()
    }

    func testDroppingTheLastReferenceInvalidates() throws {
        let recorder = Recorder()
        let keeper = try DirectoryWatcher.watchFolder(path: directory.path, delegate: recorder)
        defer { keeper.invalidate() }
        let other = TemporaryDirectory()
        let before = ProcessResources.kernelWatches()
        weak var weakWatcher: DirectoryWatcher?
        do {
            let watcher = try DirectoryWatcher.watchFolder(path: other.path, delegate: recorder)
            weakWatcher = watcher
            XCTAssertEqual(ProcessResources.kernelWatches(), before + 1)
        }
        XCTAssertNil(weakWatcher)
        waitForDelivery(keeper)  // the unsubscribe task ran before the barrier's
        XCTAssertEqual(ProcessResources.kernelWatches(), before, "the kernel watch went with the watcher")
    }

    func testTwoWatchersOfOneDirectoryShareOneKernelWatch() throws {
        let first = Recorder()
        let second = Recorder()
        let one = try DirectoryWatcher.watchFolder(path: directory.path, delegate: first)
        let before = ProcessResources.kernelWatches()
        let two = try DirectoryWatcher.watchFolder(path: directory.path, delegate: second)
        XCTAssertEqual(ProcessResources.kernelWatches(), before, "the kernel returns the same descriptor")
        let file = directory.touch("both-see-it")
        waitForDelivery(one)
        waitForDelivery(two)
        XCTAssertEqual(first.changes, [DirectoryChange(.created, file)])
        XCTAssertEqual(second.changes, [DirectoryChange(.created, file)])

        one.invalidate()
        let later = directory.touch("only-two")
        waitForDelivery(two)
        XCTAssertEqual(second.changes.last, DirectoryChange(.created, later))
        XCTAssertEqual(ProcessResources.kernelWatches(), before, "still watched for the second watcher")
        XCTAssertEqual(first.changes.count, 1)
        two.invalidate()
        XCTAssertEqual(ProcessResources.inotifyInstances(), [], "the last watcher took the loop with it")
    }

    /// 2,000 in the stress suite.
    func testCyclesLeaveDescriptorsAndThreadsWhereTheyWere() throws {
        let recorder = Recorder()
        let descriptors = ProcessResources.descriptorTargets()
        let threads = ProcessResources.threads()
        for _ in 0..<(scale == .stress ? 2_000 : 200) {
            let watcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: recorder)
            watcher.invalidate()
        }
        let after = ProcessResources.descriptorTargets()
        XCTAssertEqual(after.count, descriptors.count, ProcessResources.difference(from: descriptors, to: after))
        XCTAssertLessThanOrEqual(ProcessResources.threads(), threads, ProcessResources.threadNames())
        XCTAssertEqual(ProcessResources.loopThreads(), 0)
    }

    /// 10,000 in the stress suite.
    func testCyclesWhileAnotherWatcherKeepsTheLoop() throws {
        let recorder = Recorder()
        let keeper = try DirectoryWatcher.watchFolder(path: directory.path, delegate: recorder)
        defer { keeper.invalidate() }
        // After a delivery, so the loop's standby (started by the first callback) is counted.
        waitForDelivery(keeper)
        let descriptors = ProcessResources.openDescriptors()
        let loopThreads = ProcessResources.loopThreads()
        let watches = ProcessResources.kernelWatches()
        let other = TemporaryDirectory()
        for _ in 0..<(scale == .stress ? 10_000 : 1_000) {
            try DirectoryWatcher.watchFolder(path: other.path, delegate: recorder).invalidate()
        }
        waitForDelivery(keeper)
        XCTAssertEqual(ProcessResources.openDescriptors(), descriptors)
        XCTAssertEqual(ProcessResources.loopThreads(), loopThreads)
        XCTAssertEqual(ProcessResources.kernelWatches(), watches)
    }

    func testThousandWatchersAddOneThreadAndOneInotifyInstance() throws {
        let threads = ProcessResources.threads()
        let loopThreads = ProcessResources.loopThreads()
        let instances = ProcessResources.inotifyInstances().count
        let recorder = Recorder()
        var watchers: [DirectoryWatcher] = []
        for index in 0..<1_000 {
            let sub = directory.mkdir("d\(index)")
            watchers.append(try DirectoryWatcher.watchFolder(path: sub, delegate: recorder))
        }
        XCTAssertLessThanOrEqual(ProcessResources.threads(), threads + 1)
        XCTAssertEqual(ProcessResources.loopThreads(), loopThreads + 1)
        XCTAssertEqual(ProcessResources.inotifyInstances().count, instances + 1)
        let file = directory.touch("d999/last")
        waitForDelivery(watchers[999])
        XCTAssertEqual(recorder.changes, [DirectoryChange(.created, file)])
        for watcher in watchers { watcher.invalidate() }
        XCTAssertEqual(ProcessResources.inotifyInstances().count, instances)
        XCTAssertEqual(ProcessResources.loopThreads(), loopThreads)
    }

    func testSlowDelegateDoesNotHoldUpOtherWatchers() throws {
        let release = DispatchSemaphore(value: 0)
        let slowStarted = expectation(description: "slow delegate is inside its callback")
        let slow = Recorder()
        slow.onFirstBatch { _, _ in
            slowStarted.fulfill()
            release.wait()
        }
        let slowWatcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: slow)
        defer { slowWatcher.invalidate() }
        let other = TemporaryDirectory()
        let fast = Recorder()
        let fastWatcher = try DirectoryWatcher.watchFolder(path: other.path, delegate: fast)
        defer { fastWatcher.invalidate() }

        directory.touch("blocks")
        wait(for: [slowStarted], timeout: 10)
        for index in 0..<100 { directory.touch("queued\(index)") }  // read while the delegate is stuck
        let file = other.touch("still-delivered")
        waitForDelivery(fastWatcher)
        XCTAssertEqual(fast.changes, [DirectoryChange(.created, file)])
        release.signal()
        waitForDelivery(slowWatcher)
        XCTAssertEqual(slow.changes.count, 101, "nothing was lost while the delegate was slow")
    }

    func testBarrierOnAnInvalidatedWatcherStillCompletes() throws {
        let watcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: Recorder())
        watcher.invalidate()
        waitForDelivery(watcher)
    }

    func testManyBarriersAtOnceAllComplete() throws {
        let recorder = Recorder()
        let watcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: recorder)
        defer { watcher.invalidate() }
        let done = expectation(description: "all barriers")
        done.expectedFulfillmentCount = 200
        let target = directory!
        DispatchQueue.concurrentPerform(iterations: 200) { index in
            target.touch("b\(index)")
            watcher.barrier { done.fulfill() }
        }
        wait(for: [done], timeout: 20)
        waitForDelivery(watcher)
        XCTAssertEqual(Set(recorder.changes.map(\.path)).count, 200)
    }
}
