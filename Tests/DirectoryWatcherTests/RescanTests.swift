import Dispatch
import Foundation
import XCTest

@testable import DirectoryWatcher

/// Exact recovery: when the kernel queue overflows, the watcher lists the directory again and
/// reports exactly what it missed, after an `overflow` notice.
final class RescanTests: WatchedDirectoryTestCase {
    /// Stops the process's loop from reading, as a stopped process would: a watcher delivered on
    /// the loop thread (no standby) blocks in its callback until `resume()`.
    final class Staller: @unchecked Sendable {
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

    /// Returns once CLOCK_REALTIME_COARSE, the clock file birth times are stamped from, has moved
    /// past the present (at most one kernel tick, a few milliseconds).
    static func waitForTheBirthClockToTick() {
        let now = System.wallClockNow()
        while !System.coarseWallClockNow().isAfter(now) {}
    }

    /// Holds the loop while enough files are made to overflow the kernel queue, then makes the
    /// changes `lost` makes (the kernel drops their events), lets the loop go, and returns what
    /// the watcher received once it has caught up. The overflow notice is checked here.
    private func changes(afterAnOverflowHid lost: () -> Void) throws -> [DirectoryChange] {
        let staller = try Staller(test: self)
        for index in 0..<20_000 { directory.touch("filler-\(index)") }
        lost()
        staller.resume()
        waitForDelivery(watcher)
        let changes = recorder.changes
        XCTAssertTrue(changes.contains { $0.kind == .overflow })
        return changes
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
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
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

/// A soak test against a model: seeded random changes to a directory, some made while the loop is
/// held long enough for the kernel queue to overflow; after each step and a barrier, the changes
/// the watcher reported, applied to what it was told before, are exactly what is on disk.
/// `DIRWATCH_SOAK_SEED=N` runs one seed again; `DIRWATCH_SOAK_ROUNDS=N` runs more.
final class SoakTests: XCTestCase {
    func testRandomChangesAndOverflowsReconcileWithTheDisk() throws {
        let environment = ProcessInfo.processInfo.environment
        let rounds = environment["DIRWATCH_SOAK_ROUNDS"].flatMap(Int.init) ?? 3
        let seeds: [UInt64] =
            environment["DIRWATCH_SOAK_SEED"].flatMap(UInt64.init).map { [$0] }
            ?? (0..<UInt64(rounds)).map { 0xD1CE_0000 &+ $0 }
        for seed in seeds { try soak(seed: seed) }
    }

    /// `fs.inotify.max_queued_events`.
    static let queueLimit: Int = {
        let text = (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8)) ?? ""
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 16_384
    }()

    private func soak(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        // A memory file system where there is one: an overflow takes 16,384 creations.
        let parent = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        let directory = TemporaryDirectory(in: parent)
        let names = (0..<12).map { "n\($0)" }
        for name in names where Bool.random(using: &random) { directory.touch(name) }
        let recorder = Recorder()
        let watcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: recorder)
        defer { watcher.invalidate() }
        var model = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
        var log: [String] = []
        for step in 0..<8 {
            let overflow = Int.random(in: 0..<3, using: &random) == 0
            let staller = overflow ? try RescanTests.Staller(test: self) : nil
            for _ in 0..<Int.random(in: 1...25, using: &random) {
                let name = names.randomElement(using: &random)!
                let other = names.randomElement(using: &random)!
                let exists = FileManager.default.fileExists(atPath: directory.url(name))
                switch Int.random(in: 0..<5, using: &random) {
                case 0 where !exists:
                    directory.touch(name)
                    log.append("create \(name)")
                case 1 where exists:
                    directory.write(name, "x")
                    log.append("append \(name)")
                case 2 where exists && name != other:
                    rename(directory.url(name), directory.url(other))
                    log.append("rename \(name) \(other)")
                case 3 where exists:
                    unlink(directory.url(name))
                    log.append("remove \(name)")
                case 4 where exists:
                    chmod(directory.url(name), Bool.random(using: &random) ? 0o600 : 0o644)
                    log.append("chmod \(name)")
                default:
                    break
                }
            }
            if let staller {
                // Enough to overflow the kernel queue, half gone again: only a rescan can tell.
                let fill = Self.queueLimit + 600
                for index in 0..<fill { directory.touch("fill-\(step)-\(index)") }
                for index in 0..<fill where index % 2 == 0 { unlink(directory.url("fill-\(step)-\(index)")) }
                log.append("overflow")
                staller.resume()
            }
            waitForDelivery(watcher)
            let context = "seed \(seed) (DIRWATCH_SOAK_SEED=\(seed)), step \(step): \(log.suffix(30))"
            if overflow {
                XCTAssertTrue(recorder.changes.contains { $0.kind == .overflow }, "the queue overflowed: \(context)")
            }
            for change in recorder.changes {
                let name = String(decoding: change.path.bytes.split(separator: 0x2F).last ?? [], as: UTF8.self)
                switch change.kind {
                case .created:
                    XCTAssertTrue(model.insert(name).inserted, "created twice: \(name); \(context)")
                case .removed:
                    XCTAssertNotNil(model.remove(name), "removed, not there: \(name); \(context)")
                case .renamed:
                    let old = String(decoding: change.oldPath?.bytes.split(separator: 0x2F).last ?? [], as: UTF8.self)
                    XCTAssertNotNil(model.remove(old), "renamed from nothing: \(old); \(context)")
                    model.insert(name)
                case .modified, .attributesChanged:
                    XCTAssertTrue(model.contains(name), "changed, not there: \(name); \(context)")
                case .overflow:
                    XCTAssertTrue(overflow, "an overflow without one: \(context)")
                default:
                    XCTFail("unexpected \(change); \(context)")
                }
            }
            recorder.reset()
            let onDisk = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
            XCTAssertEqual(model, onDisk, "what was reported is what is on disk: \(context)")
            if model != onDisk { return }
        }
    }
}
