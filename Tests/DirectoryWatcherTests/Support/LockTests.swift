import Dispatch
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The futex lock every watcher's state is behind (`cdw_lock` in the C shims): exclusion under
/// contention, and its condition's waits and broadcasts. Run under both sanitizers by `.ci/run`:
/// ThreadSanitizer reports the counters below as raced if a hand-over does not order memory.
final class LockTests: XCTestCase {
    /// Unsynchronized storage: only the lock keeps the increments apart.
    private final class Counter: @unchecked Sendable {
        var value = 0
        var pairs = 0
    }

    func testThreadsIncrementingUnderTheLockLoseNoIncrement() {
        let lock = Lock()
        let counter = Counter()
        let threads = 8
        let rounds = 20_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<rounds {
                lock.withLock {
                    // Two fields written apart: a reader outside the lock would see them differ.
                    counter.value += 1
                    XCTAssertEqual(counter.pairs + 1, counter.value)
                    counter.pairs += 1
                }
            }
        }
        XCTAssertEqual(lock.withLock { counter.value }, threads * rounds)
    }

    func testAWaiterReturnsOnceABroadcastFollowsItsCondition() {
        let lock = Lock()
        let state = Counter()
        let returned = expectation(description: "the waiter saw the condition")
        let waiting = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            lock.withLock {
                waiting.signal()
                while state.value == 0 { lock.wait() }
                XCTAssertEqual(state.value, 1)
            }
            returned.fulfill()
        }
        waiting.wait()
        // Taken only once the waiter is waiting (it held the lock until then).
        lock.withLock {
            state.value = 1
            lock.broadcast()
        }
        wait(for: [returned], timeout: 10)
    }

    func testOneBroadcastWakesEveryWaiter() {
        let lock = Lock()
        let state = Counter()
        let waiters = 6
        let returned = expectation(description: "every waiter returned")
        returned.expectedFulfillmentCount = waiters
        for _ in 0..<waiters {
            Thread.detachNewThread {
                lock.withLock {
                    state.pairs += 1
                    lock.broadcast()
                    while state.value == 0 { lock.wait() }
                }
                returned.fulfill()
            }
        }
        lock.withLock {
            while state.pairs < waiters { lock.wait() }
            state.value = 1
            lock.broadcast()
        }
        wait(for: [returned], timeout: 10)
    }

    func testATimedWaitWithoutABroadcastReturnsHoldingTheLock() {
        let lock = Lock()
        let state = Counter()
        lock.withLock {
            lock.wait(nanoseconds: 1_000_000)
            // Held again: a write here is ordered with every other holder's.
            state.value += 1
        }
        XCTAssertEqual(lock.withLock { state.value }, 1)
    }

    func testBroadcastingWithNoWaiterAndWaitingWithAPendingWakeAreHarmless() {
        let lock = Lock()
        lock.withLock { lock.broadcast() }
        let state = Counter()
        // Waiters and broadcasters in turn, many times: no wake is lost, none waits for ever.
        let rounds = 2_000
        let done = expectation(description: "the waiter saw every round")
        Thread.detachNewThread {
            for round in 1...rounds {
                lock.withLock {
                    while state.value < round { lock.wait() }
                    state.pairs = round
                    lock.broadcast()
                }
            }
            done.fulfill()
        }
        for round in 1...rounds {
            lock.withLock {
                state.value = round
                lock.broadcast()
                while state.pairs < round { lock.wait() }
            }
        }
        wait(for: [done], timeout: 30)
    }
}
