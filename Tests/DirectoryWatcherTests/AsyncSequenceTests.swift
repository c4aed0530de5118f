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
}
