import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// `Delivery.eventLoopThread`: callbacks on the loop thread itself, with no hand-off.
final class DeliveryTests: WatchedDirectoryTestCase {
    private let onLoop = DirectoryWatcher.Options(delivery: .eventLoopThread)

    private static func currentThreadName() -> String {
        let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
        return name.trimmingCharacters(in: .newlines)
    }

    func testCallbacksAndBarriersRunOnTheLoopThreadInOrder() throws {
        let threads = LockedValue<Set<String>>([])
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, options: onLoop, delegate: $0) }
        recorder.onBatch = { _, _ in threads.update { $0.insert(Self.currentThreadName()) } }
        let names = (0..<200).map { String(format: "%03d", $0) }
        for name in names { directory.touch(name) }
        let barrierThread = LockedValue("")
        let delivered = expectation(description: "barrier")
        watcher.barrier {
            barrierThread.set(Self.currentThreadName())
            delivered.fulfill()
        }
        wait(for: [delivered], timeout: 10)
        XCTAssertEqual(recorder.changes, names.map { DirectoryChange(.created, directory.url($0)) })
        XCTAssertEqual(threads.get(), [EventLoop.threadName])
        XCTAssertEqual(barrierThread.get(), EventLoop.threadName)
    }

    func testWatchingAndInvalidatingFromInsideALoopThreadCallback() throws {
        let other = TemporaryDirectory()
        let started = LockedValue<DirectoryWatcher?>(nil)
        let otherRecorder = Recorder()
        let done = expectation(description: "callback finished")
        let recorder = Recorder()
        recorder.onBatch = { [onLoop] watcher, _ in
            // Both would wait for the loop thread if they did not run inline.
            started.set(try? DirectoryWatcher.watchFolder(path: other.path, options: onLoop, delegate: otherRecorder))
            watcher.invalidate()
            done.fulfill()
        }
        let watcher = try DirectoryWatcher.watchFolder(path: directory.path, options: onLoop, delegate: recorder)
        directory.touch("go")
        wait(for: [done], timeout: 10)
        XCTAssertFalse(watcher.isValid)
        let second = try XCTUnwrap(started.get(), "watchFolder inside the callback succeeded")
        defer { second.invalidate() }
        let file = other.touch("seen")
        waitForDelivery(second)
        XCTAssertEqual(otherRecorder.changes, [DirectoryChange(.created, file)])
        directory.touch("not-seen")
        waitForDelivery(second)
        XCTAssertEqual(recorder.batches, 1)
    }

    func testThousandWatchersAndADeliveryAddOnlyTheLoopThread() throws {
        let threads = ProcessResources.threads()
        var watchers: [DirectoryWatcher] = []
        for index in 0..<1_000 {
            let sub = directory.mkdir("d\(index)")
            watchers.append(try DirectoryWatcher.watchFolder(path: sub, options: onLoop) { _ in })
        }
        directory.touch("d0/x")
        let delivered = DispatchSemaphore(value: 0)
        watchers[0].barrier { delivered.signal() }
        delivered.wait()
        XCTAssertLessThanOrEqual(ProcessResources.threads(), threads + 1)
        for watcher in watchers { watcher.invalidate() }
    }

    func testInvalidateFromAnotherThreadWaitsForARunningCallback() throws {
        let inside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = LockedValue(false)
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, options: onLoop, delegate: $0) }
        recorder.onFirstBatch { _, _ in
            inside.signal()
            release.wait()
            finished.set(true)
        }
        directory.touch("slow")
        inside.wait()
        DispatchQueue.global().async { release.signal() }
        watcher.invalidate()
        XCTAssertTrue(finished.get(), "invalidate() returned only after the running callback")
    }
}
