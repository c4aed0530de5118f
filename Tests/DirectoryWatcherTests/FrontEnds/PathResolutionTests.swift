import Glibc
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Path resolution as a pure step: a fake current directory and fake symbolic links.
final class PathResolutionTests: XCTestCase {
    /// Links from path to target; `getcwd` answers `cwd`, or fails with `cwdErrno`.
    private func resolution(
        cwd: FileSystemPath = "/home/me", cwdErrno: Int32? = nil, links: [FileSystemPath: FileSystemPath] = [:]
    ) -> PathResolution {
        PathResolution(
            currentDirectory: { () throws(SyscallError) in
                if let cwdErrno { throw SyscallError(function: "getcwd", errno: cwdErrno) }
                return cwd
            },
            linkTarget: { (path) throws(SyscallError) in
                if path == "/unreadable/link" { throw SyscallError(function: "readlink", errno: EACCES) }
                return links[path]
            })
    }

    func testAbsolutePathsAreTidiedAndRelativeOnesJoinTheCurrentDirectory() throws {
        XCTAssertEqual(try resolution().absolute("//srv///x/"), "/srv/x")
        XCTAssertEqual(try resolution().absolute("docs/./a"), "/home/me/docs/a")
        XCTAssertEqual(try resolution().absolute("."), "/home/me")
        XCTAssertEqual(try resolution().absolute("../up"), "/home/me/../up", "`..` is kept, never resolved")
    }

    func testAnAbsolutePathNeverAsksForTheCurrentDirectory() throws {
        XCTAssertEqual(try resolution(cwdErrno: ENOENT).absolute("/srv"), "/srv")
    }

    func testEmptyPathAndFailingCurrentDirectoryNameThePath() {
        XCTAssertThrowsError(try resolution().absolute("")) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .emptyPath)
        }
        XCTAssertThrowsError(try resolution(cwdErrno: ENOENT).absolute("docs")) { error in
            let error = error as? DirectoryWatcherError
            XCTAssertEqual(error?.code, .noSuchPath)
            XCTAssertEqual(error?.path, "docs")
            XCTAssertEqual(error?.function, "getcwd")
        }
    }

    func testAFileEntryIsItsDirectoryAndName() throws {
        let (directory, name) = try resolution().fileEntry("/etc/app/config.toml", given: "config.toml")
        XCTAssertEqual(directory, "/etc/app")
        XCTAssertEqual(name, Array("config.toml".utf8))
    }

    func testSymbolicLinksAreFollowedRelativeToTheirDirectory() throws {
        let links: [FileSystemPath: FileSystemPath] = [
            "/etc/app/config": "../shared/config.real",  // relative: from /etc/app
            // `..` stays in the path, as the kernel's own lookup of it in readlink resolves it.
            "/etc/app/../shared/config.real": "/srv/configs/final",  // absolute
        ]
        let (directory, name) = try resolution(links: links).fileEntry("/etc/app/config", given: "config")
        XCTAssertEqual(directory, "/srv/configs")
        XCTAssertEqual(name, Array("final".utf8))
    }

    func testALinkLoopIsALoopAndTheKernelsLimitHolds() throws {
        XCTAssertThrowsError(
            try resolution(links: ["/a/x": "/a/y", "/a/y": "/a/x"]).fileEntry("/a/x", given: "x")
        ) { error in
            let error = error as? DirectoryWatcherError
            XCTAssertEqual(error?.code, .symbolicLinkLoop)
            XCTAssertEqual(error?.path, "x")
            XCTAssertNil(error?.function, "no system call failed")
        }
        // A chain of exactly 40 links resolves; one more does not.
        var chain: [FileSystemPath: FileSystemPath] = [:]
        for index in 0..<PathResolution.maximumLinks {
            chain[FileSystemPath("/c/\(index)")] = FileSystemPath("/c/\(index + 1)")
        }
        XCTAssertEqual(try resolution(links: chain).fileEntry("/c/0", given: "c").directory, "/c")
        chain[FileSystemPath("/c/\(PathResolution.maximumLinks)")] = "/c/end-too-far"
        chain["/c/end-too-far"] = "/c/beyond"
        XCTAssertThrowsError(try resolution(links: chain).fileEntry("/c/0", given: "c"))
    }

    func testPathsThatNameNoEntryAreRefusedWithTheirOwnCode() {
        for path: FileSystemPath in ["/", "/srv/.."] {
            XCTAssertThrowsError(try resolution().fileEntry(path, given: "\(path)")) { error in
                let error = error as? DirectoryWatcherError
                XCTAssertEqual(error?.code, .notAnEntry)
                XCTAssertNil(error?.function)
                XCTAssertNil(error?.errno)
                XCTAssertEqual(error?.description.contains("not a file in a directory"), true)
            }
        }
    }

    func testAFailingReadlinkNamesThePath() {
        XCTAssertThrowsError(try resolution().fileEntry("/unreadable/link", given: "link")) { error in
            let error = error as? DirectoryWatcherError
            XCTAssertEqual(error?.code, .permissionDenied)
            XCTAssertEqual(error?.function, "readlink")
            XCTAssertEqual(error?.path, "link")
        }
    }
}
