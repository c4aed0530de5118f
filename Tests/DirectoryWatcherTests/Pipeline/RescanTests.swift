import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Exact recovery: when the kernel queue overflows, the watcher lists the directory again and
/// reports exactly what it missed, after an `overflow` notice.
class RescanTests: WatchedDirectoryTestCase {
    /// Small overflows made through the syscall table here; kernel-sized ones in the stress suite.
    var scale: Scale { .fast }
    private(set) var loss: QueueLoss!

    override func setUpWithError() throws {
        try super.setUpWithError()
        loss = try QueueLoss(scale)
    }

    override func tearDown() {
        super.tearDown()
        loss?.shutdown()
        loss = nil
    }

    /// A watcher of ``directory`` on the loop whose queue ``loss`` loses.
    func watchDirectory(options: DirectoryWatcher.Options = .init()) throws {
        try watch {
            try DirectoryWatcher.make(path: directory.path, options: options, delegate: $0, queue: nil, loop: loss.loop)
        }
    }

    /// How many files the tests that make many make: enough to overflow the kernel queue twice
    /// over at stress scale.
    var many: Int { scale == .stress ? 40_000 : 300 }

    /// Returns once CLOCK_REALTIME_COARSE, the clock file birth times are stamped from, has moved
    /// past the present (at most one kernel tick, a few milliseconds).
    static func waitForTheBirthClockToTick() {
        let now = System.wallClockNow()
        while !System.coarseWallClockNow().isAfter(now) {}
    }

    /// Holds the loop, loses its queue, makes the changes `lost` makes (whose events are lost
    /// too), lets the loop go, and returns what the watcher received once it has caught up. The
    /// overflow notice is checked here.
    private func changes(afterAnOverflowHid lost: () -> Void) throws -> [DirectoryChange] {
        try loss.lose(test: self, fillers: directory, lost)
        waitForDelivery(watcher)
        let changes = recorder.changes
        XCTAssertTrue(changes.contains { $0.kind == .overflow })
        return changes
    }

    func testFilesCreatedWhileTheLoopIsStoppedAreEachReportedOnce() throws {
        try watchDirectory()
        let names = (0..<many).map { "f\($0)" }
        // At stress scale, 40,000 files overflow the queue by themselves: no fillers.
        try loss.lose(test: self, fillers: nil) { for name in names { directory.touch(name) } }
        waitForDelivery(watcher)
        let changes = recorder.changes
        XCTAssertTrue(changes.contains { $0.kind == .overflow }, "the kernel queue overflowed: the notice comes")
        let created = changes.filter { $0.kind == .created }.map(\.path)
        XCTAssertEqual(created.count, many, "each file once")
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
        try watchDirectory()
        let changes = try changes(afterAnOverflowHid: {
            for index in 0..<50 {
                unlink(directory.url("removed-\(index)"))
                rename(directory.url("renamed-\(index)"), directory.url("moved-\(index)"))
                directory.write("rewritten-\(index)", "new content")
            }
        })
        for index in 0..<50 {
            XCTAssertTrue(
                changes.contains {
                    $0.kind == .removed && $0.path == FileSystemPath(directory.url("removed-\(index)"))
                        && $0.foundByRescan
                },
                "removed-\(index)")
            XCTAssertTrue(
                changes.contains {
                    $0.kind == .renamed && $0.path == FileSystemPath(directory.url("moved-\(index)"))
                        && $0.oldPath == FileSystemPath(directory.url("renamed-\(index)")) && $0.foundByRescan
                }, "renamed-\(index)")
            XCTAssertTrue(
                changes.contains {
                    $0.kind == .modified && $0.path == FileSystemPath(directory.url("rewritten-\(index)"))
                        && $0.foundByRescan
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

    func testFilesCreatedWhileWatchingAreFollowedToTheirNewNamesAfterAnOverflow() throws {
        try watchDirectory()
        // Created after the first listing: the events told of them, not a listing. The listing
        // of names the loop makes when idle learns their inodes, once the file system's clock
        // has ticked past their birth (until then a file born a moment later could carry a
        // reused inode and the same birth time); the test runs it at once.
        for index in 0..<50 {
            directory.touch("new-\(index)")
            directory.touch("written-\(index)")
        }
        waitForDelivery(watcher)
        Self.waitForTheBirthClockToTick()
        watcher.learnInodesNow()
        let changes = try changes(afterAnOverflowHid: {
            for index in 0..<50 {
                rename(directory.url("new-\(index)"), directory.url("moved-\(index)"))
                rename(directory.url("written-\(index)"), directory.url("moved-written-\(index)"))
                directory.write("moved-written-\(index)", "new content")
            }
        })
        for index in 0..<50 {
            for (old, new) in [("new-\(index)", "moved-\(index)"), ("written-\(index)", "moved-written-\(index)")] {
                XCTAssertTrue(
                    changes.contains {
                        $0.kind == .renamed && $0.path == FileSystemPath(directory.url(new))
                            && $0.oldPath == FileSystemPath(directory.url(old)) && $0.foundByRescan
                    }, "\(old) -> \(new)")
            }
            XCTAssertTrue(
                changes.contains {
                    $0.kind == .modified && $0.path == FileSystemPath(directory.url("moved-written-\(index)"))
                        && $0.foundByRescan
                },
                "moved-written-\(index)")
        }
        XCTAssertFalse(changes.contains { $0.kind == .removed }, "nothing was removed")
    }

    func testAFewFilesCreatedInALargeDirectoryAreFollowedToTheirNewNamesAfterAnOverflow() throws {
        // Few names lacking their inodes among many listed: the idle moment reads a status for
        // each of them (Router.entriesPerStatus) instead of listing the directory again.
        for index in 0..<200 { directory.touch("old-\(index)") }
        try watchDirectory()
        for index in 0..<5 { directory.touch("new-\(index)") }
        waitForDelivery(watcher)
        Self.waitForTheBirthClockToTick()
        watcher.learnInodesNow()
        let changes = try changes(afterAnOverflowHid: {
            for index in 0..<5 { rename(directory.url("new-\(index)"), directory.url("moved-\(index)")) }
        })
        for index in 0..<5 {
            XCTAssertTrue(
                changes.contains {
                    $0.kind == .renamed && $0.path == FileSystemPath(directory.url("moved-\(index)"))
                        && $0.oldPath == FileSystemPath(directory.url("new-\(index)")) && $0.foundByRescan
                }, "new-\(index) -> moved-\(index)")
        }
        XCTAssertFalse(changes.contains { $0.kind == .removed }, "nothing was removed")
        XCTAssertFalse(changes.contains { $0.path.description.contains("/old-") }, "the files listed did not change")
    }

    func testWithoutSnapshotsAnOverflowIsANoticeOnly() throws {
        try watchDirectory(options: .init(recovery: .notice))
        let changes = try changes(afterAnOverflowHid: {
            for index in 0..<100 { directory.touch("f\(index)") }
        })
        XCTAssertFalse(changes.contains { $0.foundByRescan })
        let created = changes.filter { $0.kind == .created && !$0.path.description.contains("/filler-") }
        XCTAssertLessThan(created.count, 100, "the kernel dropped some")
    }

    func testListingTheDirectoryIsNotReportedAsItsOwnChange() throws {
        let options = DirectoryWatcher.Options(events: .all)
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, options: options, delegate: $0) }
        let file = directory.touch("a")
        XCTAssertEqual(delivered().filter { $0.path == FileSystemPath(file) }.first?.kind, .created)
        XCTAssertFalse(recorder.changes.contains { $0.path == FileSystemPath(directory.path) })
    }
}
