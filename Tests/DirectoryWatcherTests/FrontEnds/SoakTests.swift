import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// A soak test against a model: seeded random changes to a directory, some made while the loop is
/// held long enough for the kernel queue to overflow; after each step and a barrier, the changes
/// the watcher reported, applied to what it was told before, are exactly what is on disk.
/// `DIRWATCH_SOAK_SEED=N` runs one seed again; `DIRWATCH_SOAK_ROUNDS=N` runs more. Overflows are
/// made through the syscall table here, by the kernel in ``SoakStressTests``.
class SoakTests: XCTestCase {
    var scale: Scale { .fast }

    func testRandomChangesAndOverflowsReconcileWithTheDisk() throws {
        let environment = ProcessInfo.processInfo.environment
        let rounds = environment["DIRWATCH_SOAK_ROUNDS"].flatMap(Int.init) ?? 3
        let seeds: [UInt64] =
            environment["DIRWATCH_SOAK_SEED"].flatMap(UInt64.init).map { [$0] }
            ?? (0..<UInt64(rounds)).map { 0xD1CE_0000 &+ $0 }
        for seed in seeds { try soak(seed: seed) }
    }

    private func soak(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        // A memory file system where there is one: an overflow takes 16,384 creations.
        let parent = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        let directory = TemporaryDirectory(in: parent)
        let names = (0..<12).map { "n\($0)" }
        for name in names where Bool.random(using: &random) { directory.touch(name) }
        let loss = try QueueLoss(scale)
        defer { loss.shutdown() }
        let recorder = Recorder()
        let watcher = try DirectoryWatcher.make(path: directory.path, delegate: recorder, queue: nil, loop: loss.loop)
        defer { watcher.invalidate() }
        var model = Set(try FileManager.default.contentsOfDirectory(atPath: directory.path))
        var log: [String] = []
        for step in 0..<8 {
            let overflow = Int.random(in: 0..<3, using: &random) == 0
            func changeTheDirectory() {
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
            }
            if overflow {
                try loss.lose(test: self, fillers: nil) {
                    changeTheDirectory()
                    // Files made, half gone again, all while the queue is lost: only a rescan can
                    // tell. At stress scale, enough of them to overflow the kernel queue.
                    let fill = scale == .stress ? QueueLoss.queueLimit + 600 : 40
                    for index in 0..<fill { directory.touch("fill-\(step)-\(index)") }
                    for index in 0..<fill where index % 2 == 0 { unlink(directory.url("fill-\(step)-\(index)")) }
                    log.append("overflow")
                }
            } else {
                changeTheDirectory()
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
