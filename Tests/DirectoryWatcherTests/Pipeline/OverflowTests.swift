import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// A real kernel queue overflow: the loop is held inside a task while more events happen than
/// the kernel queues (fs.inotify.max_queued_events), then let go.
final class OverflowTests: XCTestCase {
    private func maxQueuedEvents() -> Int {
        let text = (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8)) ?? ""
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 16_384
    }

    func testEveryWatcherIsToldAndBarriersStillComplete() throws {
        let limit = maxQueuedEvents()
        try XCTSkipIf(limit > 200_000, "max_queued_events is \(limit): too many events to overflow it quickly")
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let first = TemporaryDirectory()
        let second = TemporaryDirectory()
        let firstRecorder = Recorder()
        let secondRecorder = Recorder()
        let firstWatcher = try DirectoryWatcher.make(path: first.path, delegate: firstRecorder, queue: nil, loop: loop)
        let secondWatcher = try DirectoryWatcher.make(
            path: second.path, delegate: secondRecorder, queue: nil, loop: loop)
        defer {
            firstWatcher.invalidate()
            secondWatcher.invalidate()
        }

        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        loop.execute { _ in
            held.signal()
            release.wait()
        }
        held.wait()
        // Alternate two files so that no two consecutive events are identical (the kernel merges those).
        first.touch("a")
        first.touch("b")
        let fds = [open(first.url("a"), O_WRONLY), open(first.url("b"), O_WRONLY)]
        var byte: UInt8 = 1
        for index in 0..<(limit + 1_000) { _ = write(fds[index % 2], &byte, 1) }
        for fd in fds { close(fd) }
        // A barrier requested while the queue is full: its event may be the one the kernel drops.
        let barrierDone = expectation(description: "barrier through an overflow")
        firstWatcher.barrier { barrierDone.fulfill() }
        release.signal()
        wait(for: [barrierDone], timeout: 20)

        XCTAssertTrue(firstRecorder.changes.contains(DirectoryChange(.overflow, first.path, directory: true)))
        waitForDelivery(secondWatcher)
        XCTAssertEqual(secondRecorder.changes, [DirectoryChange(.overflow, second.path, directory: true)])

        // And the loop keeps working afterwards.
        firstRecorder.reset()
        let after = first.touch("after")
        waitForDelivery(firstWatcher)
        XCTAssertEqual(firstRecorder.changes, [DirectoryChange(.created, after)])
    }

    func testMalformedReadIsReportedAsPossibleLoss() throws {
        // A read that returns a truncated record: the parser cannot trust it, so watchers are told.
        let inject = LockedValue(false)
        let loop = try EventLoop(system: System(.live.truncatingNextRead(armed: inject)))
        defer { loop.shutdown() }
        let directory = TemporaryDirectory()
        let recorder = Recorder()
        let watcher = try DirectoryWatcher.make(path: directory.path, delegate: recorder, queue: nil, loop: loop)
        defer { watcher.invalidate() }
        inject.set(true)
        directory.touch("x")
        waitForDelivery(watcher)
        // The notice, and the creation exactly once: read before the truncated record, or (when
        // the truncated record was the creation's) found by the rescan after the notice.
        let changes = recorder.changes
        XCTAssertEqual(
            changes.filter { $0.kind == .overflow }, [DirectoryChange(.overflow, directory.path, directory: true)])
        let created = changes.filter { $0.kind == .created }
        XCTAssertEqual(created.map(\.path), [FileSystemPath(directory.url("x"))])
        if let creation = created.first, creation.foundByRescan {
            XCTAssertEqual(changes.last, creation, "a change the rescan found comes after the notice")
        }
        XCTAssertEqual(changes.count, 2)
    }
}
