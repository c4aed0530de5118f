import Dispatch
import Foundation
import XCTest

@testable import DirectoryWatcher

/// Exact recovery: when the kernel queue overflows, the watcher lists the directory again and
/// reports exactly what it missed, after an `overflow` notice.
final class RescanTests: WatchedDirectoryTestCase {
    /// Stops the process's loop from reading, as a stopped process would: a watcher delivered on
    /// the loop thread (no standby) blocks in its callback until `resume()`.
    private final class Staller: @unchecked Sendable {
        private let release = DispatchSemaphore(value: 0)
        private let directory = TemporaryDirectory()
        private var watcher: DirectoryWatcher?

        init(test: XCTestCase) throws {
            let started = test.expectation(description: "the loop is stalled")
            let release = release
            let options = DirectoryWatcher.Options(delivery: .eventLoopThread)
            watcher = try DirectoryWatcher.watchFolder(path: directory.path, options: options) { _ in
                started.fulfill()
                release.wait()
            }
            directory.touch("stall")
            test.wait(for: [started], timeout: 10)
        }

        func resume() {
            release.signal()
            watcher?.invalidate()
            watcher = nil
        }
    }

    func testFortyThousandFilesCreatedWhileTheLoopIsStoppedAreEachReportedOnce() throws {
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
        let staller = try Staller(test: self)
        let names = (0..<40_000).map { "f\($0)" }
        for name in names { directory.touch(name) }
        staller.resume()
        waitForDelivery(watcher)
        let changes = recorder.changes
        XCTAssertTrue(changes.contains { $0.kind == .overflow }, "the kernel queue overflowed: the notice comes")
        let created = changes.filter { $0.kind == .created }.map(\.path)
        XCTAssertEqual(created.count, 40_000, "each file once")
        XCTAssertEqual(Set(created), Set(names.map { FileSystemPath(directory.url($0)) }))
        XCTAssertTrue(changes.contains { $0.foundByRescan }, "what the kernel dropped was found by the rescan")
        // The notice comes before every change the rescan found.
        let notice = try XCTUnwrap(changes.firstIndex { $0.kind == .overflow })
        XCTAssertFalse(changes[..<notice].contains { $0.foundByRescan })
    }

    func testRemovedRenamedAndRewrittenWhileStoppedAreReportedAsSuch() throws {
        // Files that were there when watching started: their status is known exactly.
        for index in 0..<50 {
            directory.touch("removed-\(index)")
            directory.touch("renamed-\(index)")
            directory.touch("rewritten-\(index)")
        }
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
        let staller = try Staller(test: self)
        for index in 0..<50 {
            unlink(directory.url("removed-\(index)"))
            rename(directory.url("renamed-\(index)"), directory.url("moved-\(index)"))
            directory.write("rewritten-\(index)", "new content")
        }
        for index in 0..<20_000 { directory.touch("filler-\(index)") }  // enough to overflow
        staller.resume()
        waitForDelivery(watcher)
        let changes = recorder.changes
        XCTAssertTrue(changes.contains { $0.kind == .overflow })
        for index in 0..<50 {
            XCTAssertTrue(
                changes.contains {
                    $0.kind == .removed && $0.path == FileSystemPath(directory.url("removed-\(index)"))
                },
                "removed-\(index)")
            XCTAssertTrue(
                changes.contains {
                    $0.kind == .renamed && $0.path == FileSystemPath(directory.url("moved-\(index)"))
                        && $0.oldPath == FileSystemPath(directory.url("renamed-\(index)"))
                }, "renamed-\(index)")
            XCTAssertTrue(
                changes.contains {
                    $0.kind == .modified && $0.path == FileSystemPath(directory.url("rewritten-\(index)"))
                },
                "rewritten-\(index)")
        }
        // Applied to the listing at the start, the changes give what is on disk.
        var names = Set((0..<50).flatMap { ["removed-\($0)", "renamed-\($0)", "rewritten-\($0)"] })
        for change in changes {
            let name = String(decoding: change.path.bytes.split(separator: 0x2F).last ?? [], as: UTF8.self)
            switch change.kind {
            case .created: XCTAssertTrue(names.insert(name).inserted, "created twice: \(name)")
            case .removed: XCTAssertNotNil(names.remove(name), "removed twice: \(name)")
            case .renamed:
                let old = String(decoding: change.oldPath?.bytes.split(separator: 0x2F).last ?? [], as: UTF8.self)
                XCTAssertNotNil(names.remove(old))
                names.insert(name)
            default: break
            }
        }
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        XCTAssertEqual(names, Set(onDisk))
    }

    func testWithoutSnapshotsAnOverflowIsANoticeOnly() throws {
        try watch {
            try DirectoryWatcher.watchFolder(path: directory.path, options: .init(recovery: .notice), delegate: $0)
        }
        let staller = try Staller(test: self)
        for index in 0..<20_000 { directory.touch("f\(index)") }
        staller.resume()
        waitForDelivery(watcher)
        let changes = recorder.changes
        XCTAssertTrue(changes.contains { $0.kind == .overflow })
        XCTAssertFalse(changes.contains { $0.foundByRescan })
        XCTAssertLessThan(changes.filter { $0.kind == .created }.count, 20_000, "the kernel dropped some")
    }

    func testListingTheDirectoryIsNotReportedAsItsOwnChange() throws {
        let options = DirectoryWatcher.Options(events: .all)
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, options: options, delegate: $0) }
        let file = directory.touch("a")
        XCTAssertEqual(delivered().filter { $0.path == FileSystemPath(file) }.first?.kind, .created)
        XCTAssertFalse(recorder.changes.contains { $0.path == FileSystemPath(directory.path) })
    }
}
