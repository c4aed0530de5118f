import Foundation
import XCTest

@testable import DirectoryWatcher

final class AsyncSequenceTests: WatchedDirectoryTestCase {
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
        XCTAssertEqual(ProcessResources.loopThreads(), 0, "the sequence's watcher was the only one")
        XCTAssertLessThanOrEqual(ProcessResources.kernelWatches(), watchesBefore)
    }

    func testDroppingTheSequenceEndsTheWatch() throws {
        do {
            let changes = try DirectoryWatcher.changes(path: directory.path)
            XCTAssertEqual(ProcessResources.loopThreads(), 1)
            _ = changes
        }
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
}
