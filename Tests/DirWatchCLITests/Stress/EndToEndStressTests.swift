import Foundation
import XCTest

/// `dirwatch` under loads that take seconds: the kernel queue overflowed many times over.
final class EndToEndStressTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        try StressSuite.require()
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("dirwatch-stress-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        directory = url.path
    }

    override func tearDown() {
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }

    private func touch(_ path: String) {
        let fd = open(path, O_CREAT | O_WRONLY, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0, "open \(path)")
        close(fd)
    }

    /// The kernel queue overflows while dirwatch is stopped; once it goes on, it says so and then
    /// reports every file, each once, the ones the kernel dropped found by a rescan.
    func testFortyThousandFilesMadeWhileStoppedAreEachReportedOnce() throws {
        let run = try Run(EndToEndTests.binary, ["--json", directory])
        try run.waitUntilEstablished()
        run.pause()
        for index in 0..<40_000 { touch(directory + "/f\(index)") }
        run.resume()
        var created = Set<String>()
        var overflows = 0
        var foundByRescan = 0
        while created.count < 40_000 {
            let json = try run.nextJSON()
            switch json["kind"] as? String {
            case "overflow":
                overflows += 1
                XCTAssertEqual(json["path"] as? String, directory)
            case "created":
                let path = try XCTUnwrap(json["path"] as? String)
                XCTAssertTrue(created.insert(path).inserted, "reported twice: \(path)")
                if json["foundByRescan"] as? Bool == true { foundByRescan += 1 }
            default:
                XCTFail("unexpected line: \(json)")
            }
        }
        XCTAssertEqual(overflows, 1, "one line says changes were lost and a rescan follows")
        XCTAssertGreaterThan(foundByRescan, 0)
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
    }
}
