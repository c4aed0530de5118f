import Foundation
import Synchronization
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Settled watchers on the real clock, as users run them.
final class SettledCopyTests: XCTestCase {
    /// A copy of a 200 MB file (cp, into the watched directory) is one `created`, after the copy
    /// has ended: when the callback runs, the file has all its bytes.
    func testACopyOfALargeFileIsOneCreatedAfterTheCopyEnds() throws {
        let source = TemporaryDirectory()
        let target = TemporaryDirectory()
        let size = 200 * 1024 * 1024
        let original = source.url("big.bin")
        let fd = open(original, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
        let block = [UInt8](repeating: 0xA5, count: 1024 * 1024)
        for _ in 0..<(size / block.count) { XCTAssertEqual(write(fd, block, block.count), block.count) }
        close(fd)

        let copy = target.url("big.bin")
        let sizes = LockedValue<[Int]>([])
        let batches = LockedValue<[[DirectoryChange]]>([])
        let delivered = expectation(description: "a settled batch")
        let watcher = try DirectoryWatcher.watchFolder(
            path: target.path, options: .init(settling: .init(quietPeriod: .milliseconds(200)))
        ) { changes in
            var status = stat()
            sizes.update { $0.append(stat(copy, &status) == 0 ? Int(status.st_size) : -1) }
            batches.update { $0.append(changes) }
            delivered.fulfill()
        }
        defer { watcher.invalidate() }

        let cp = Process()
        cp.executableURL = URL(fileURLWithPath: "/bin/cp")
        cp.arguments = [original, copy]
        try cp.run()
        cp.waitUntilExit()
        XCTAssertEqual(cp.terminationStatus, 0)
        wait(for: [delivered], timeout: 30)
        let probe = expectation(description: "barrier")
        watcher.barrier { probe.fulfill() }
        wait(for: [probe], timeout: 30)
        XCTAssertEqual(batches.get(), [[DirectoryChange(.created, copy)]])
        XCTAssertEqual(sizes.get(), [size], "told once the copy was complete")
    }
}
