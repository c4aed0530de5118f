import XCTest

/// ``AsyncSequenceTests`` at full size: 100,000 files made while a slow consumer falls behind, at
/// each buffer limit.
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
}
