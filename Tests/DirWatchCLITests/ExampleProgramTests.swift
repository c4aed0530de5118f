import Foundation
import XCTest

/// The example programs (Examples/) run as their comments say to run them, built by `swift build`
/// next to `dirwatch` (``EndToEndTests/binary``). No sleeps: every wait is for the process to end.
final class ExampleProgramTests: XCTestCase {
    static let waitFor = EndToEndTests.binary.deletingLastPathComponent().appendingPathComponent("wait-for")

    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("wait-for-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: Self.waitFor.path), "missing \(Self.waitFor.path)")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    /// `wait-for ARGUMENTS...` started in the temporary directory, as `cd DIR && wait-for ...`.
    private func waitFor(_ arguments: [String]) throws -> Run {
        try Run(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", #"cd "$1" && shift && exec "$0" "$@""#, Self.waitFor.path, directory.path] + arguments)
    }

    private func touch(_ name: String, file: StaticString = #filePath, line: UInt = #line) {
        let fd = open(directory.appendingPathComponent(name).path, O_CREAT | O_WRONLY, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0, "open \(name)", file: file, line: line)
        close(fd)
    }

    /// A bare name is a file in the current directory: that directory is watched (it used to be
    /// an empty path, which nothing can watch).
    func testWaitForABareNameThatExists() throws {
        touch("done.flag")
        let run = try waitFor(["done.flag"])
        XCTAssertEqual(try run.waitForExit(), 0, run.errorOutput())
        XCTAssertEqual(run.errorOutput(), "")
    }

    /// Made after the start: whether it comes before wait-for's watch is in place or after, the
    /// answer is 0 (it checks once it watches), so the test does not depend on which. The timeout
    /// only stops a wait-for that missed it, which then fails the test instead of hanging it.
    func testWaitForABareNameMadeAfterTheStart() throws {
        let run = try waitFor(["--timeout", "15", "done.flag"])
        touch("done.flag")
        XCTAssertEqual(try run.waitForExit(), 0, run.errorOutput())
        XCTAssertEqual(run.errorOutput(), "")
    }

    /// `--gone` with a bare name: removed after the start, wherever that falls.
    func testWaitForABareNameToGo() throws {
        touch("backup.lock")
        let run = try waitFor(["--gone", "--timeout", "15", "backup.lock"])
        XCTAssertEqual(unlink(directory.appendingPathComponent("backup.lock").path), 0)
        XCTAssertEqual(try run.waitForExit(), 0, run.errorOutput())
        XCTAssertEqual(run.errorOutput(), "")
    }

    /// A bare name that never comes: the current directory is watched, and the wait ends with the
    /// timeout, saying so, not with a watch that could not be set up (both are status 1).
    func testWaitForABareNameThatNeverComesTimesOut() throws {
        let run = try waitFor(["--timeout", "0.1", "never.flag"])
        XCTAssertEqual(try run.waitForExit(), 1)
        XCTAssertEqual(run.errorOutput(), "wait-for: never.flag did not appear after 0.1 s\n")
    }
}
