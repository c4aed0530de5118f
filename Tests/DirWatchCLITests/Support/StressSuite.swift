import Foundation
import XCTest

/// The stress suite: the long runs (kernel-sized overflows of 16,384 events and more, the soak,
/// bursts of 20,000 changes, thousands of lifetime cycles). `swift test` skips them, counted as
/// skipped; `DIRWATCH_STRESS=1 swift test` runs them too, and `.ci/run` always does.
enum StressSuite {
    static let isEnabled = ProcessInfo.processInfo.environment["DIRWATCH_STRESS"] == "1"

    /// Skips the calling test unless the stress suite was asked for.
    static func require() throws {
        if !isEnabled { throw XCTSkip("a stress test: DIRWATCH_STRESS=1 swift test runs it") }
    }
}

/// How big a test that runs in both suites makes its load: small in `swift test`, the real size
/// (a kernel queue overflowed by filling it) in the stress suite.
enum Scale {
    case fast, stress
}
