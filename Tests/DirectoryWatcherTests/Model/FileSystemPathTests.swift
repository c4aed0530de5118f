import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

final class FileSystemPathTests: XCTestCase {
    func testAbsoluteJoinsAndNormalizesLexically() {
        let cwd: FileSystemPath = "/home/me"
        XCTAssertEqual(FileSystemPath.absolute(".", currentDirectory: cwd), "/home/me")
        XCTAssertEqual(FileSystemPath.absolute("./docs/", currentDirectory: cwd), "/home/me/docs")
        XCTAssertEqual(FileSystemPath.absolute("a//b/./c", currentDirectory: cwd), "/home/me/a/b/c")
        XCTAssertEqual(FileSystemPath.absolute("../up", currentDirectory: cwd), "/home/me/../up", ".. is kept")
        XCTAssertEqual(FileSystemPath.absolute("/", currentDirectory: cwd), "/")
        XCTAssertEqual(FileSystemPath.absolute("//srv///x/", currentDirectory: cwd), "/srv/x")
    }

    func testComponents() {
        let path: FileSystemPath = "/srv/uploads/a.txt"
        XCTAssertEqual(path.lastComponent, "a.txt")
        XCTAssertEqual(path.parent, "/srv/uploads")
        XCTAssertEqual(FileSystemPath("/top").parent, "/")
        XCTAssertEqual(FileSystemPath("/").appending("x"), "/x")
        XCTAssertEqual(FileSystemPath("/a").appending("b"), "/a/b")
        XCTAssertEqual(FileSystemPath("/a").appending(FileSystemPath(bytes: [])), "/a")
    }

    /// As dirname(1): a bare name's directory is the current one, not an empty path (which no
    /// system call takes).
    func testParentIsWhatDirnameSays() {
        XCTAssertEqual(FileSystemPath("name").parent, ".", "a bare name: the current directory")
        XCTAssertEqual(FileSystemPath("./name").parent, ".")
        XCTAssertEqual(FileSystemPath("/name").parent, "/")
        XCTAssertEqual(FileSystemPath("/").parent, "/", "the root is its own")
        XCTAssertEqual(FileSystemPath("a/b").parent, "a")
        XCTAssertEqual(FileSystemPath("a/b/c").parent, "a/b")
        XCTAssertEqual(FileSystemPath(bytes: []).parent, ".", "dirname(\"\") is .")
        XCTAssertEqual(FileSystemPath(bytes: [0xFF]).parent, ".", "a name that is not UTF-8")
    }

    func testAppendingAnEntryName() {
        XCTAssertEqual(FileSystemPath("/d").appending(bytes: Array("name".utf8)), "/d/name")
        XCTAssertEqual(FileSystemPath("/").appending(bytes: Array("x".utf8)), "/x", "no second slash after the root")
        XCTAssertEqual(FileSystemPath("/d/").appending(bytes: Array("x".utf8)), "/d/x")
        XCTAssertEqual(FileSystemPath("/d").appending(bytes: [UInt8]()), "/d")
        // Parsed names are slices of a larger buffer: only the slice's bytes count.
        let read = Array("..name..".utf8)
        XCTAssertEqual(FileSystemPath("/d").appending(bytes: read[2..<6]), "/d/name")
        XCTAssertEqual(FileSystemPath("/d").appending(bytes: [0xFF, 0x0A]).bytes, Array("/d/".utf8) + [0xFF, 0x0A])
        // As long as Linux allows (PATH_MAX, NAME_MAX): past any stack scratch space.
        let directory = FileSystemPath(bytes: [UInt8(ascii: "/")] + [UInt8](repeating: UInt8(ascii: "a"), count: 3839))
        let name = [UInt8](repeating: UInt8(ascii: "b"), count: 255)
        XCTAssertEqual(directory.appending(bytes: name).bytes, directory.bytes + [UInt8(ascii: "/")] + name)
    }

    func testBytesThatAreNotUTF8() {
        let path = FileSystemPath(bytes: [0x2F, 0x61, 0xFF, 0xC3, 0xA9, 0x80])
        XCTAssertNil(path.string)
        XCTAssertEqual(path.description, "/a\\xFFé\\x80")
        XCTAssertEqual(path.withCString { strlen($0) }, 6)
    }

    func testNulEndsThePath() {
        XCTAssertEqual(FileSystemPath(bytes: [0x61, 0, 0x62]).bytes, [0x61])
    }

    func testOrderIsByteOrder() {
        XCTAssertEqual(["b", "B", "a", "é"].map { FileSystemPath($0) }.sorted(), ["B", "a", "b", "é"])
    }

    func testChangeDescription() {
        XCTAssertEqual(DirectoryChange(.renamed, "/d/new", from: "/d/old").description, "renamed /d/old -> /d/new")
        XCTAssertEqual(DirectoryChange(.created, "/d/sub", directory: true).description, "created /d/sub/")
    }
}
