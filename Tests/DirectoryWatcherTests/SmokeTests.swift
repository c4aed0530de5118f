import XCTest
@testable import DirectoryWatcher

final class SmokeTests: XCTestCase {
    func testBuilds() {}
}
