import DirectoryWatcher
import DirectoryWatcherTesting
import Foundation
import XCTest

/// "Safe from any thread": threads change the simulation at once, move its time and wait on it,
/// while its watcher delivers; nothing is lost and the delegate's model ends as the tree does.
/// Run under both sanitizers by .ci/run.
final class SimulationThreadingTests: XCTestCase {
    /// The names of the files a delegate saw, kept from the changes alone.
    final class Model: DirectoryWatcherDelegate, @unchecked Sendable {
        private let lock = NSLock()
        private var names: Set<String> = []
        var files: Set<String> { lock.withLock { names } }

        func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) {
            lock.withLock {
                for change in changes {
                    let name = change.path.lastComponent.description
                    switch change.kind {
                    case .created, .movedIn: names.insert(name)
                    case .removed, .movedOut: names.remove(name)
                    case .renamed:
                        if let old = change.oldPath { names.remove(old.lastComponent.description) }
                        names.insert(name)
                    default: break
                    }
                }
            }
        }
    }

    func testThreadsChangingTheSimulationAtOnceLoseNothing() async throws {
        let files = SimulatedFileSystem()
        files.createDirectory("/inbox")
        let model = Model()
        let watcher = try files.watchFolder(path: "/inbox", delegate: model)
        let threads = 4
        let rounds = 150
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for round in 0..<rounds {
                let name = "/inbox/t\(thread)-\(round)"
                files.createFile(name)
                files.write(name)
                if round % 3 == 0 { files.rename(name, to: name + ".renamed") }
                if round % 5 == 0 { files.remove(round % 3 == 0 ? name + ".renamed" : name) }
                if round % 50 == 0 { files.losingEvents { files.createFile(name + ".lost") } }
                if round % 40 == 0 { files.passTime(.milliseconds(1)) }
            }
        }
        await files.waitUntilDelivered()
        var expected: Set<String> = []
        for thread in 0..<threads {
            for round in 0..<rounds {
                let name = "t\(thread)-\(round)"
                if round % 50 == 0 { expected.insert(name + ".lost") }
                if round % 5 == 0 { continue }
                expected.insert(round % 3 == 0 ? name + ".renamed" : name)
            }
        }
        XCTAssertEqual(model.files, expected)
        watcher.invalidate()
    }

    func testAWatcherOutlivingItsSimulationEndsCleanly() async throws {
        var files: SimulatedFileSystem? = SimulatedFileSystem()
        files!.createDirectory("/inbox")
        let watcher = try files!.watchFolder(path: "/inbox") { _ in }
        files = nil
        await watcher.barrier()
        watcher.invalidate()
        XCTAssertFalse(watcher.isMonitoring)
    }
}
