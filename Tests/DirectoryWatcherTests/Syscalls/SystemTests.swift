import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

final class SystemTests: XCTestCase {
    func testErrorsKeepFunctionAndErrno() {
        XCTAssertThrowsError(try System(.live.failing(\.eventfd, errno: EMFILE)).eventFD()) { error in
            XCTAssertEqual(error as? SyscallError, SyscallError(function: "eventfd", errno: EMFILE))
            XCTAssertEqual("\(error)", "eventfd: Too many open files (EMFILE)")
        }
    }

    func testWouldBlockIsNotAnError() throws {
        let calls = SystemCalls.live.failing(\.read, errno: EAGAIN)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16, alignment: 8)
        defer { buffer.deallocate() }
        XCTAssertNil(try System(calls).read(3, into: buffer))
    }

    func testCloseInterruptedCountsAsClosed() {
        let attempts = LockedValue(0)
        System(.live.failing(\.close, errno: EINTR, counting: attempts)).close(12345)
        XCTAssertEqual(attempts.get(), 1, "never retried: the descriptor is already released")
    }
}
