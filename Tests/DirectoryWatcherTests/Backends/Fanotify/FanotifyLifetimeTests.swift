import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// fanotify trees made and ended from many threads at once while their directories change: the
/// marks, their mount descriptors and the handle table come and go with them.
class FanotifyLifetimeTests: WatchedDirectoryTestCase {
    /// Five trees per thread here; 25 in the stress suite.
    var scale: Scale { .fast }

    func testTreesMadeAndEndedFromEightThreadsLeaveNoDescriptorOrMarkBehind() throws {
        // Another watcher keeps the loop, so what the trees leave behind is what is counted.
        let keeper = try DirectoryWatcher.watchFolder(path: directory.path) { _ in }
        defer { keeper.invalidate() }
        waitForDelivery(keeper)
        let descriptors = ProcessResources.descriptorTargets()
        let roots = (0..<8).map { directory.mkdir("t\($0)") }
        for root in roots {
            for index in 0..<10 { XCTAssertEqual(Glibc.mkdir("\(root)/d\(index)", 0o755), 0) }
        }
        let stop = LockedValue(false)
        let target = directory!
        let writerDone = expectation(description: "the writer stopped")
        let writer = Thread {
            var index = 0
            while !stop.get() {
                target.touch("t\(index % 8)/d\(index % 10)/f\(index % 7)")
                index += 1
            }
            writerDone.fulfill()
        }
        writer.start()
        let failures = LockedValue<[String]>([])
        let rounds = scale == .stress ? 25 : 5
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for round in 0..<rounds {
                do {
                    let tree = try DirectoryWatcher.watchFolder(
                        path: roots[thread], options: .init(recursive: true, backend: .fanotify)
                    ) { _ in }
                    if round % 5 == 0 { _ = tree.watchedDirectories() }
                    tree.invalidate()
                } catch {
                    failures.update { $0.append("\(error)") }
                }
            }
        }
        stop.set(true)
        // Its last file closed: a file it has open is not a descriptor the trees left behind.
        wait(for: [writerDone], timeout: 30)
        waitForDelivery(keeper)
        XCTAssertEqual(failures.get(), [])
        // The marks' mount descriptors go with their last tree, and the group with the last mark.
        // (Dispatch may open an eventfd of its own meanwhile: only ours are counted.)
        let after = ProcessResources.descriptorTargets()
        let opened = after.filter { descriptors[$0.key] != $0.value }
        XCTAssertEqual(opened.values.filter { !$0.hasPrefix("anon_inode:") }, [], "a mount descriptor left behind")
        XCTAssertEqual(
            after.values.filter { $0 == "anon_inode:[fanotify]" }.count, 0,
            ProcessResources.difference(from: descriptors, to: after))
        // A tree made after all that still sees its changes.
        try watch {
            try DirectoryWatcher.watchFolder(
                path: roots[0], options: .init(recursive: true, backend: .fanotify), delegate: $0)
        }
        directory.touch("t0/d9/last")
        XCTAssertTrue(delivered().contains(DirectoryChange(.created, directory.url("t0/d9/last"))))
    }
}
