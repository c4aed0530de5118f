import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// What a settling watcher that compares content drops, with digests the test gives (no file is
/// read): only a `modified` of a file whose digest is the one remembered.
final class ContentMemoryTests: XCTestCase {
    private var memory = ContentMemory()
    /// The files' digests as the test has them now; a missing one cannot be read.
    private var files: [String: ContentDigest] = [:]

    private func digest(_ size: Int64, _ hash: Int) -> ContentDigest { ContentDigest(size: size, hash: hash) }

    private func filter(_ batch: [DirectoryChange]) -> [DirectoryChange] {
        let files = files
        return memory.filter(batch) { files[String(decoding: $0.bytes, as: UTF8.self)] }
    }

    func testARewriteOfTheSameBytesIsDroppedAndOtherBytesAreNot() {
        files["/d/a"] = digest(3, 1)
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/a")]).count, 1, "the first write: nothing to compare")
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/a")]), [], "the same bytes again")
        files["/d/a"] = digest(3, 2)
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/a")]), [DirectoryChange(.modified, "/d/a")])
        files["/d/a"] = digest(4, 2)
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/a")]).count, 1, "another size")
        XCTAssertEqual(filter([DirectoryChange(.attributesChanged, "/d/a")]).count, 1, "only writes are compared")
    }

    func testACreatedFileIsRememberedAndReported() {
        files["/d/new"] = digest(1, 7)
        XCTAssertEqual(filter([DirectoryChange(.created, "/d/new")]), [DirectoryChange(.created, "/d/new")])
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/new")]), [], "written again with what it was made with")
        files["/d/in"] = digest(1, 8)
        _ = filter([DirectoryChange(.movedIn, "/d/in")])
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/in")]), [])
    }

    func testAFileThatCannotBeReadIsReportedAndForgotten() {
        files["/d/a"] = digest(3, 1)
        _ = filter([DirectoryChange(.modified, "/d/a")])
        files["/d/a"] = nil
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/a")]).count, 1)
        files["/d/a"] = digest(3, 1)
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/a")]).count, 1, "forgotten: its first write again")
    }

    func testRemovalsAndRenamesMoveOrForgetWhatIsRemembered() {
        files["/d/a"] = digest(3, 1)
        files["/d/sub/b"] = digest(3, 2)
        _ = filter([DirectoryChange(.created, "/d/a"), DirectoryChange(.created, "/d/sub/b")])
        _ = filter([DirectoryChange(.removed, "/d/a")])
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/a")]).count, 1, "a file made again under the name")

        // A file renamed keeps its bytes: the new name is read and remembered, the old forgotten.
        files["/d/c"] = digest(3, 1)
        _ = filter([DirectoryChange(.renamed, "/d/c", from: "/d/a")])
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/c")]), [])
        files["/d/a"] = digest(3, 1)
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/a")]).count, 1)

        // A directory removed or renamed forgets what is below it.
        _ = filter([DirectoryChange(.renamed, "/d/moved", from: "/d/sub", directory: true)])
        files["/d/moved/b"] = digest(3, 2)
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/moved/b")]).count, 1)
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/moved/b")]), [])
        _ = filter([DirectoryChange(.removed, "/d/moved", directory: true)])
        XCTAssertEqual(filter([DirectoryChange(.modified, "/d/moved/b")]).count, 1)
    }

    func testTheRootGoneForgetsEverything() {
        files["/d/a"] = digest(3, 1)
        _ = filter([DirectoryChange(.created, "/d/a")])
        XCTAssertEqual(filter([DirectoryChange(.rootRemoved, "/d", directory: true)]).count, 1)
        XCTAssertTrue(memory.digests.isEmpty)
    }

    /// Past its capacity it starts again, so memory stays bounded.
    func testPastItsCapacityItStartsAgain() {
        for index in 0..<ContentMemory.capacity {
            files["/d/\(index)"] = digest(1, index)
        }
        _ = filter((0..<ContentMemory.capacity).map { DirectoryChange(.created, "/d/\($0)") })
        XCTAssertEqual(memory.digests.count, ContentMemory.capacity)
        files["/d/one-more"] = digest(1, -1)
        _ = filter([DirectoryChange(.created, "/d/one-more")])
        XCTAssertEqual(memory.digests.count, 1)
    }

    /// The digest of a real file: its bytes, not its size or times; nothing for what is not a
    /// regular file.
    func testTheDigestIsOfTheBytes() throws {
        let directory = TemporaryDirectory()
        let system = System(.live)
        let path = FileSystemPath(directory.touch("a"))
        directory.write("a", "same size")
        let first = try XCTUnwrap(system.contentDigest(of: path))
        XCTAssertEqual(first.size, 9)
        XCTAssertEqual(system.contentDigest(of: path), first)
        directory.touch("a")
        directory.write("a", "SAME SIZE")
        XCTAssertNotEqual(system.contentDigest(of: path), first)
        XCTAssertNil(system.contentDigest(of: FileSystemPath(directory.path)), "a directory")
        XCTAssertNil(system.contentDigest(of: FileSystemPath(directory.url("missing"))))
        XCTAssertEqual(mkfifo(directory.url("fifo"), 0o644), 0)
        XCTAssertNil(system.contentDigest(of: FileSystemPath(directory.url("fifo"))), "a fifo, without blocking")
    }
}
