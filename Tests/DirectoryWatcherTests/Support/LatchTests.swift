import Dispatch
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The one-shot latch behind "returns once the loop has stopped, been joined, been released".
final class LatchTests: XCTestCase {
    func testAWaitReturnsOnceAnotherThreadOpensIt() {
        let latch = Latch()
        let waiting = DispatchSemaphore(value: 0)
        let returned = expectation(description: "wait returned")
        Thread.detachNewThread {
            waiting.signal()
            latch.wait()
            returned.fulfill()
        }
        waiting.wait()
        latch.open()
        wait(for: [returned], timeout: 10)
    }

    func testOnceOpenEveryWaitReturnsAtOnceAndOpeningAgainIsHarmless() {
        let latch = Latch()
        latch.open()
        latch.open()
        let returned = expectation(description: "waits returned")
        returned.expectedFulfillmentCount = 8
        for _ in 0..<8 {
            DispatchQueue.global().async {
                latch.wait()
                returned.fulfill()
            }
        }
        wait(for: [returned], timeout: 10)
    }
}
