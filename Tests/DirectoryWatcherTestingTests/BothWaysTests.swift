import DirectoryWatcher
import DirectoryWatcherTesting
import Foundation
import XCTest

/// One scenario, on disk and in the simulation: the delegate is called the same way, with the
/// same changes, in the same batches. The simulation replaces the kernel's calls and nothing
/// above them, so this is what holds the kit's promise that a test passing in simulation holds on
/// disk.
final class BothWaysTests: XCTestCase {
    /// Every call a delegate gets, as text, paths relative to the watched directory.
    final class CallLog: DirectoryWatcherDelegate, @unchecked Sendable {
        private let lock = NSLock()
        private var recorded: [String] = []
        var root = ""

        var calls: [String] { lock.withLock { recorded } }

        func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) {
            let root = root
            let text = changes.map { change -> String in
                let path = Self.relative(change.path.description, root)
                let old = change.oldPath.map { Self.relative($0.description, root) + " -> " } ?? ""
                return "\(change.kind.rawValue) \(old)\(path)\(change.isDirectory ? "/" : "")"
                    + (change.foundByRescan ? " (rescan)" : "")
            }
            lock.withLock { recorded.append("didObserve [\(text.joined(separator: ", "))]") }
        }

        func directoryDidChange(_ watcher: DirectoryWatcher) {
            lock.withLock { recorded.append("directoryDidChange") }
        }

        static func relative(_ path: String, _ root: String) -> String {
            path == root ? "." : path.hasPrefix(root + "/") ? String(path.dropFirst(root.count + 1)) : path
        }
    }

    /// The steps, each ended by a barrier: one batch each. Each is one system call on disk (an
    /// append, not a rewrite that truncates first), so that its events reach the loop in one read
    /// there too, and the batches are the disk's whatever the timing.
    enum Step: CaseIterable {
        case createFile, writeFile, rename, makeDirectory, removeFile, renameDirectory, removeDirectory, removeRoot
    }

    func testOneScenarioCallsTheDelegateAlikeOnDiskAndInTheSimulation() async throws {
        let onDisk = try await runOnDisk()
        let simulated = try await runSimulated()
        XCTAssertEqual(simulated, onDisk, "the simulation's calls (first) differ from the disk's")
        // What the scenario delivers, so that a change in both at once is seen too.
        XCTAssertEqual(
            onDisk,
            [
                "didObserve [created a.txt]", "directoryDidChange",
                "didObserve [modified a.txt]", "directoryDidChange",
                "didObserve [renamed a.txt -> b.txt]", "directoryDidChange",
                "didObserve [created sub/]", "directoryDidChange",
                "didObserve [removed b.txt]", "directoryDidChange",
                "didObserve [renamed sub -> renamed/]", "directoryDidChange",
                "didObserve [removed renamed/]", "directoryDidChange",
                "didObserve [rootRemoved ./]", "directoryDidChange",
            ])
    }

    private func runOnDisk() async throws -> [String] {
        let folder = try TemporaryDirectory()
        try folder.createDirectory("watched")
        let log = CallLog()
        log.root = folder.path("watched")
        let watcher = try DirectoryWatcher.watchFolder(path: folder.path("watched"), delegate: log)
        for step in Step.allCases {
            let path = { (name: String) in "watched/" + name }
            switch step {
            case .createFile: try folder.createFile(path("a.txt"))
            case .writeFile: try folder.append(path("a.txt"), "hello")
            case .rename: try folder.rename(path("a.txt"), to: path("b.txt"))
            case .makeDirectory: try folder.createDirectory(path("sub"))
            case .removeFile: try folder.remove(path("b.txt"))
            case .renameDirectory: try folder.rename(path("sub"), to: path("renamed"))
            case .removeDirectory: try folder.remove(path("renamed"))
            case .removeRoot: try folder.remove("watched")
            }
            await watcher.barrier()
        }
        watcher.invalidate()
        return log.calls
    }

    private func runSimulated() async throws -> [String] {
        let files = SimulatedFileSystem()
        files.createDirectory("/watched")
        let log = CallLog()
        log.root = "/watched"
        let watcher = try files.watchFolder(path: "/watched", delegate: log)
        for step in Step.allCases {
            switch step {
            case .createFile: files.createFile("/watched/a.txt")
            case .writeFile: files.write("/watched/a.txt")
            case .rename: files.rename("/watched/a.txt", to: "/watched/b.txt")
            case .makeDirectory: files.createDirectory("/watched/sub")
            case .removeFile: files.remove("/watched/b.txt")
            case .renameDirectory: files.rename("/watched/sub", to: "/watched/renamed")
            case .removeDirectory: files.remove("/watched/renamed")
            case .removeRoot: files.remove("/watched")
            }
            await watcher.barrier()
        }
        watcher.invalidate()
        return log.calls
    }
}
