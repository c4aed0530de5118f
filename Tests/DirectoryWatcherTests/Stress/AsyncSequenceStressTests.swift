import XCTest

/// ``AsyncSequenceTests`` at full size: 100,000 files made while a slow consumer falls behind, at
/// each buffer limit (20,000 in trees), and ten cancelled iterations.
final class AsyncSequenceStressTests: AsyncSequenceTests {
    override var scale: Scale { .stress }

    override func setUpWithError() throws {
        try StressSuite.require()
        try super.setUpWithError()
    }

    /// 100,000 files.
    override func testASlowConsumerGetsEachChangeOnceWithABufferOf1() async throws {
        try await super.testASlowConsumerGetsEachChangeOnceWithABufferOf1()
    }

    /// 100,000 files.
    override func testASlowConsumerGetsEachChangeOnceWithABufferOf8() async throws {
        try await super.testASlowConsumerGetsEachChangeOnceWithABufferOf8()
    }

    /// 100,000 files.
    override func testASlowConsumerGetsEachChangeOnceWithABufferOf100() async throws {
        try await super.testASlowConsumerGetsEachChangeOnceWithABufferOf100()
    }

    /// 100,000 files, so that the consumer falls more than 16,384 changes behind.
    override func testASlowConsumerGetsEachChangeOnceWithTheDefaultBuffer() async throws {
        try await super.testASlowConsumerGetsEachChangeOnceWithTheDefaultBuffer()
    }

    /// 20,000 files in two directories of an inotify tree.
    override func testASlowConsumerOfAnInotifyTreeGetsEachChangeOnce() async throws {
        try await super.testASlowConsumerOfAnInotifyTreeGetsEachChangeOnce()
    }

    /// 20,000 files in two directories of a fanotify tree.
    override func testASlowConsumerOfAFanotifyTreeGetsEachChangeOnce() async throws {
        try await super.testASlowConsumerOfAFanotifyTreeGetsEachChangeOnce()
    }

    /// Ten iterations.
    /// 20,000 files through a settling watcher.
    override func testASlowConsumerOfASettlingWatcherGetsEachChangeOnce() async throws {
        try await super.testASlowConsumerOfASettlingWatcherGetsEachChangeOnce()
    }

    override func testACancelledIterationEndsAtOnceUnderANonstopWriter() async throws {
        try await super.testACancelledIterationEndsAtOnceUnderANonstopWriter()
    }
}
