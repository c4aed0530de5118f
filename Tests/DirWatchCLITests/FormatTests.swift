import DirectoryWatcher
import Foundation
import XCTest

@testable import DirWatchCLI

final class FormatTests: XCTestCase {
    private func text(_ change: DirectoryChange, color: Bool = false) -> String {
        var bytes: [UInt8] = []
        ChangeFormat.text(change, color: color, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private func json(_ change: DirectoryChange) throws -> [String: Any] {
        var bytes: [UInt8] = []
        ChangeFormat.json(change, into: &bytes)
        XCTAssertEqual(bytes.last, UInt8(ascii: "\n"))
        XCTAssertEqual(bytes.filter { $0 == UInt8(ascii: "\n") }.count, 1, "one line")
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    private func change(
        _ kind: DirectoryChange.Kind, _ path: FileSystemPath, old: FileSystemPath? = nil, directory: Bool = false
    ) -> DirectoryChange {
        DirectoryChange(kind: kind, path: path, oldPath: old, isDirectory: directory)
    }

    func testTextLines() {
        XCTAssertEqual(text(change(.created, "/d/a.txt")), "created           /d/a.txt\n")
        XCTAssertEqual(text(change(.created, "/d/sub", directory: true)), "created           /d/sub/\n")
        XCTAssertEqual(text(change(.renamed, "/d/b", old: "/d/a")), "renamed           /d/a -> /d/b\n")
        XCTAssertEqual(text(change(.attributesChanged, "/d/x")), "attributesChanged /d/x\n")
    }

    /// The kinds only --event selects print under the names --event takes for them.
    func testOptInKindsPrintByName() throws {
        XCTAssertEqual(text(change(.opened, "/d/a")), "opened            /d/a\n")
        XCTAssertEqual(text(change(.accessed, "/d/a")), "accessed          /d/a\n")
        XCTAssertEqual(text(change(.writerClosed, "/d/a")), "writerClosed      /d/a\n")
        XCTAssertEqual(text(change(.readerClosed, "/d", directory: true)), "readerClosed      /d/\n")
        for kind in [DirectoryChange.Kind.opened, .accessed, .writerClosed, .readerClosed] {
            XCTAssertEqual(try json(change(kind, "/d/a"))["kind"] as? String, kind.rawValue)
            XCTAssertNotNil(eventKinds[kind.rawValue.lowercased()], "--event takes \(kind.rawValue)")
        }
    }

    func testColourWrapsOnlyTheKind() {
        XCTAssertEqual(text(change(.removed, "/d/a"), color: true), "\u{1B}[31mremoved\u{1B}[0m           /d/a\n")
    }

    func testTextEscapesEverythingThatCouldForgeALineOrMoveTheCursor() {
        let name = "/d/a\nb\tc\r\u{1B}[2J\\d\u{7F}\u{85}\u{202E}txt.exe ok é 漢"
        XCTAssertEqual(
            text(change(.created, FileSystemPath(name))),
            "created           /d/a\\nb\\tc\\r\\u{1B}[2J\\\\d\\u{7F}\\u{0085}\\u{202E}txt.exe ok é 漢\n")
    }

    func testTextShowsBytesThatAreNotUTF8() {
        let path = FileSystemPath(bytes: Array("/d/bad".utf8) + [0xFF, 0xC3] + Array("x".utf8))
        XCTAssertEqual(text(change(.created, path)), "created           /d/bad\\xFF\\xC3x\n")
    }

    func testJSONFields() throws {
        let object = try json(change(.renamed, "/d/new name", old: "/d/old\"name", directory: true))
        XCTAssertEqual(object["kind"] as? String, "renamed")
        XCTAssertEqual(object["path"] as? String, "/d/new name")
        XCTAssertEqual(object["oldPath"] as? String, "/d/old\"name")
        XCTAssertEqual(object["isDirectory"] as? Bool, true)
        XCTAssertNil(try json(change(.created, "/d/a"))["oldPath"])
    }

    func testRescannedChangesAndAFailedRescanAreMarked() throws {
        var found = change(.created, "/d/a")
        found.foundByRescan = true
        XCTAssertEqual(text(found), "created           /d/a  (rescan)\n")
        XCTAssertEqual(try json(found)["foundByRescan"] as? Bool, true)
        XCTAssertNil(try json(change(.created, "/d/a"))["foundByRescan"])

        var failed = change(.overflow, "/d", directory: true)
        failed.error = DirectoryWatcherError(code: .permissionDenied, path: "/d", function: "open", errno: EACCES)
        XCTAssertEqual(
            text(failed),
            "overflow          /d/  (rescan failed: permission denied; the directory must be readable and searchable)\n"
        )
        XCTAssertEqual(
            try json(failed)["error"] as? String,
            "permission denied; the directory must be readable and searchable")
        XCTAssertNil(try json(change(.overflow, "/d", directory: true))["error"])
    }

    func testJSONStaysValidForOddNames() throws {
        let names = [
            "/d/new\nline", "/d/quote\"", "/d/back\\slash", "/d/\u{1B}[31m", "/d/tab\t", "/d/\u{2028}sep",
            "/d/nul-free \u{7}",
        ]
        for name in names {
            XCTAssertEqual(try json(change(.created, FileSystemPath(name)))["path"] as? String, name)
        }
    }

    func testJSONCarriesExactBytesOfNamesThatAreNotUTF8() throws {
        let bytes: [UInt8] = Array("/d/bad-".utf8) + [0xFF, 0xFE, 0x80] + Array(".txt".utf8)
        let object = try json(change(.renamed, FileSystemPath(bytes: bytes), old: FileSystemPath(bytes: [0x2F, 0xE9])))
        XCTAssertEqual(object["path"] as? String, "/d/bad-\u{FFFD}\u{FFFD}\u{FFFD}.txt")
        let encoded = try XCTUnwrap(object["pathBytes"] as? String)
        XCTAssertEqual(Data(base64Encoded: encoded).map(Array.init), bytes)
        XCTAssertEqual(
            Data(base64Encoded: try XCTUnwrap(object["oldPathBytes"] as? String)).map(Array.init), [0x2F, 0xE9])
        XCTAssertNil(try json(change(.created, "/d/fine"))["pathBytes"], "only when needed")
    }

    func testBase64MatchesFoundation() {
        for length in 0..<20 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            var ours: [UInt8] = []
            Escaping.base64(bytes, into: &ours)
            XCTAssertEqual(String(decoding: ours, as: UTF8.self), Data(bytes).base64EncodedString())
        }
    }
}
