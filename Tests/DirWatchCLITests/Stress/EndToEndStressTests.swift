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

    /// A fanotify tree's mark covers its whole file system, so its queue carries every event
    /// made elsewhere on it too (issue 28). Two writers make 60,000 files each outside the tree
    /// while dirwatch, at nice 19, is stopped and reads nothing: 120,000 events and more, over
    /// seven times a default queue (`fs.fanotify.max_queued_events`, 16,384). None of that may
    /// overflow the quiet tree's queue: once dirwatch goes on, the next line it prints is the
    /// one change made in the tree, and nothing else comes, no overflow and no rescan's finds.
    func testTwoWritersOutsideAFanotifyTreeCannotOverflowItsQueue() throws {
        let quiet = directory + "/quiet"
        XCTAssertEqual(mkdir(quiet, 0o755), 0)
        XCTAssertEqual(mkdir(quiet + "/sub", 0o755), 0)
        touch(quiet + "/sub/old")
        let nice = URL(fileURLWithPath: "/usr/bin/nice")
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: nice.path), "needs nice(1)")
        let run = try Run(
            nice, ["-n", "19", EndToEndTests.binary.path, "-r", "--backend", "fanotify", "--json", quiet])
        try run.waitUntilEstablished()
        XCTAssertTrue(run.errorsSoFar().contains("dirwatch: fanotify for \(quiet): "), run.errorsSoFar())
        run.pause()
        let writers = DispatchGroup()
        for writer in 0..<2 {
            let outside = directory + "/outside-\(writer)"
            XCTAssertEqual(mkdir(outside, 0o755), 0)
            DispatchQueue.global().async(group: writers) {
                for index in 0..<60_000 { close(open(outside + "/f\(index)", O_CREAT | O_WRONLY, 0o644)) }
            }
        }
        writers.wait()
        for writer in 0..<2 {
            let made = try FileManager.default.contentsOfDirectory(atPath: directory + "/outside-\(writer)")
            XCTAssertEqual(made.count, 60_000, "writer \(writer) made all its files")
        }
        run.resume()
        touch(quiet + "/sub/new")
        XCTAssertEqual(
            try run.nextJSON(), ["kind": "created", "path": quiet + "/sub/new", "isDirectory": false],
            "the one change in the tree, and no overflow before it")
        run.interrupt()
        XCTAssertEqual(try run.waitForExit(), 0)
        XCTAssertEqual(run.remainingOutput(), "", "nothing else was reported: no overflow, no rescan")
    }
}
