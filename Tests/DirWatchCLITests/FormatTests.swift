import DirectoryWatcher
import Foundation
import Testing

@testable import DirWatchCLI

@Suite struct FormatTests {
    private func text(_ change: DirectoryChange, color: Bool = false) -> String {
        var bytes: [UInt8] = []
        ChangeFormat.text(change, color: color, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private func json(_ change: DirectoryChange) throws -> [String: Any] {
        var bytes: [UInt8] = []
        ChangeFormat.json(change, into: &bytes)
        #expect(bytes.last == UInt8(ascii: "\n"))
        #expect(bytes.filter { $0 == UInt8(ascii: "\n") }.count == 1, "one line")
        return try #require(JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    private func change(
        _ kind: DirectoryChange.Kind, _ path: FileSystemPath, old: FileSystemPath? = nil, directory: Bool = false
    ) -> DirectoryChange {
        DirectoryChange(kind: kind, path: path, oldPath: old, isDirectory: directory)
    }

    @Test func testTextLines() {
        #expect(text(change(.created, "/d/a.txt")) == "created           /d/a.txt\n")
        #expect(text(change(.created, "/d/sub", directory: true)) == "created           /d/sub/\n")
        #expect(text(change(.renamed, "/d/b", old: "/d/a")) == "renamed           /d/a -> /d/b\n")
        #expect(text(change(.attributesChanged, "/d/x")) == "attributesChanged /d/x\n")
    }

    /// Each kind is written by its raw value, in both formats (the formats name each kind from a
    /// table of their own, to write it with one copy).
    @Test func testEveryKindIsWrittenByItsRawValue() throws {
        for kind in DirectoryChange.Kind.allCases {
            let line = text(change(kind, "/d/a"))
            #expect(line.hasPrefix(kind.rawValue + " "), "\(line)")
            #expect(line.dropFirst(kind.rawValue.count).prefix { $0 == " " }.count == max(1, 18 - kind.rawValue.count))
            #expect(try json(change(kind, "/d/a"))["kind"] as? String == kind.rawValue)
            for directory in [false, true] {
                var bytes: [UInt8] = []
                ChangeFormat.json(change(kind, "/d/a", directory: directory), into: &bytes)
                #expect(
                    String(decoding: bytes, as: UTF8.self)
                        == #"{"kind":"\#(kind.rawValue)","path":"/d/a","isDirectory":\#(directory)}"# + "\n")
            }
        }
    }

    /// The kinds only --event selects print under the names --event takes for them.
    @Test func testOptInKindsPrintByName() throws {
        #expect(text(change(.opened, "/d/a")) == "opened            /d/a\n")
        #expect(text(change(.accessed, "/d/a")) == "accessed          /d/a\n")
        #expect(text(change(.writerClosed, "/d/a")) == "writerClosed      /d/a\n")
        #expect(text(change(.readerClosed, "/d", directory: true)) == "readerClosed      /d/\n")
        for kind in [DirectoryChange.Kind.opened, .accessed, .writerClosed, .readerClosed] {
            #expect(try json(change(kind, "/d/a"))["kind"] as? String == kind.rawValue)
            #expect(eventKinds[kind.rawValue.lowercased()] != nil, "--event takes \(kind.rawValue)")
        }
    }

    @Test func testColourWrapsOnlyTheKind() {
        #expect(text(change(.removed, "/d/a"), color: true) == "\u{1B}[31mremoved\u{1B}[0m           /d/a\n")
    }

    @Test func testTextEscapesEverythingThatCouldForgeALineOrMoveTheCursor() {
        let name = "/d/a\nb\tc\r\u{1B}[2J\\d\u{7F}\u{85}\u{202E}txt.exe ok é 漢"
        #expect(
            text(change(.created, FileSystemPath(name)))
                == "created           /d/a\\nb\\tc\\r\\u{1B}[2J\\\\d\\u{7F}\\u{0085}\\u{202E}txt.exe ok é 漢\n")
    }

    @Test func testTextShowsBytesThatAreNotUTF8() {
        let path = FileSystemPath(bytes: Array("/d/bad".utf8) + [0xFF, 0xC3] + Array("x".utf8))
        #expect(text(change(.created, path)) == "created           /d/bad\\xFF\\xC3x\n")
    }

    @Test func testJSONFields() throws {
        let object = try json(change(.renamed, "/d/new name", old: "/d/old\"name", directory: true))
        #expect(object["kind"] as? String == "renamed")
        #expect(object["path"] as? String == "/d/new name")
        #expect(object["oldPath"] as? String == "/d/old\"name")
        #expect(object["isDirectory"] as? Bool == true)
        #expect(try json(change(.created, "/d/a"))["oldPath"] == nil)
    }

    @Test func testRescannedChangesAndFailedDirectoriesAreMarked() throws {
        var found = change(.created, "/d/a")
        found.foundByRescan = true
        #expect(text(found) == "created           /d/a  (rescan)\n")
        #expect(try json(found)["foundByRescan"] as? Bool == true)
        #expect(try json(change(.created, "/d/a"))["foundByRescan"] == nil)

        var failed = change(.failed, "/d", directory: true)
        failed.error = DirectoryWatcherError(code: .permissionDenied, path: "/d", function: "open", errno: EACCES)
        #expect(
            text(failed)
                == "failed            /d/  (permission denied; the directory must be readable and searchable)\n"
        )
        #expect(try json(failed)["kind"] as? String == "failed")
        #expect(
            try json(failed)["error"] as? String == "permission denied; the directory must be readable and searchable")
        #expect(try json(change(.overflow, "/d", directory: true))["error"] == nil)
    }

    /// The check eight bytes at a time agrees with a byte at a time: every byte value, at every
    /// position of a word and of the tail, among the lowest, highest and an ordinary plain byte,
    /// with either byte the caller sets apart.
    @Test func testPlainPathsAreFoundEightBytesAtATime() {
        for other in [UInt8(ascii: "\""), UInt8(ascii: ">")] {
            for (length, base) in [1, 7, 8, 9, 16, 21].flatMap({ length in [0x20, 0x61, 0x7E].map { (length, $0) } }) {
                for position in 0..<length {
                    for value in UInt8.min...UInt8.max {
                        var bytes = [UInt8](repeating: UInt8(base), count: length)
                        bytes[position] = value
                        let expected = value >= 0x20 && value < 0x7F && value != UInt8(ascii: "\\") && value != other
                        #expect(
                            Escaping.isPlain(bytes, except: other) == expected,
                            "byte \(value) at \(position) of \(length)")
                    }
                }
            }
        }
    }

    @Test func testJSONStaysValidForOddNames() throws {
        let names = [
            "/d/new\nline", "/d/quote\"", "/d/back\\slash", "/d/\u{1B}[31m", "/d/tab\t", "/d/\u{2028}sep",
            "/d/nul-free \u{7}",
        ]
        for name in names {
            #expect(try json(change(.created, FileSystemPath(name)))["path"] as? String == name)
        }
    }

    /// DEL, C1 controls and the bidirectional controls are valid in JSON, but a consumer that
    /// prints the path would pass them to its terminal: they come as `\uXXXX`, and parse back to
    /// the same name. Their neighbours in UTF-8 (same lead bytes) are left as they are.
    @Test func testJSONEscapesDELC1AndBidiControls() throws {
        let escaped: [(Unicode.Scalar, String)] = [
            ("\u{7F}", #"\u007F"#), ("\u{80}", #"\u0080"#), ("\u{85}", #"\u0085"#), ("\u{9B}", #"\u009B"#),
            ("\u{9F}", #"\u009F"#), ("\u{61C}", #"\u061C"#), ("\u{200E}", #"\u200E"#), ("\u{200F}", #"\u200F"#),
            ("\u{202A}", #"\u202A"#), ("\u{202B}", #"\u202B"#), ("\u{202C}", #"\u202C"#),
            ("\u{202D}", #"\u202D"#), ("\u{202E}", #"\u202E"#), ("\u{2066}", #"\u2066"#),
            ("\u{2067}", #"\u2067"#), ("\u{2068}", #"\u2068"#), ("\u{2069}", #"\u2069"#),
            ("\u{2028}", #"\u2028"#), ("\u{2029}", #"\u2029"#),
        ]
        for (scalar, escape) in escaped {
            let name = "/d/a\(Character(scalar))b"
            var bytes: [UInt8] = []
            ChangeFormat.json(change(.created, FileSystemPath(name)), into: &bytes)
            let line = String(decoding: bytes, as: UTF8.self)
            #expect(line.contains("\"/d/a\(escape)b\""), "\(escape): \(line)")
            #expect(!line.unicodeScalars.contains(scalar), "\(escape) raw in \(line)")
            #expect(try json(change(.created, FileSystemPath(name)))["path"] as? String == name)
        }
        // U+00A0 and U+00E9 (lead byte C2, C3), U+0600 (D8), U+2030 and U+2065 (E2): kept.
        let kept = "/d/\u{A0}é\u{600}\u{2030}\u{2065}\u{202F}漢😀"
        var bytes: [UInt8] = []
        ChangeFormat.json(change(.created, FileSystemPath(kept)), into: &bytes)
        let expected = #"{"kind":"created","path":""# + kept + #"","isDirectory":false}"# + "\n"
        #expect(String(decoding: bytes, as: UTF8.self) == expected)
    }

    /// ` -> ` separates a rename's names: in a name it is written ` -\u{3E} `, so that a line
    /// holds at most one literal ` -> `, the separator; a name ending in ` ->` would otherwise
    /// make a second with it.
    @Test func testTextMarksARenameSeparatorInAName() {
        #expect(text(change(.created, "/d/a -> b")) == #"created           /d/a -\u{3E} b"# + "\n")
        let renamed = text(change(.renamed, "/d/new -> x", old: "/d/old ->"))
        #expect(renamed == #"renamed           /d/old -\u{3E} -> /d/new -\u{3E} x"# + "\n")
        #expect(renamed.components(separatedBy: " -> ").count == 2, "one separator: \(renamed)")
        #expect(text(change(.created, "/d/a>b ->c a-> b > -")) == "created           /d/a>b -\\u{3E}c a-> b > -\n")
        #expect(text(change(.created, "/d/x->y")) == "created           /d/x->y\n", "no space before it: kept")
    }

    @Test func testJSONCarriesExactBytesOfNamesThatAreNotUTF8() throws {
        let bytes: [UInt8] = Array("/d/bad-".utf8) + [0xFF, 0xFE, 0x80] + Array(".txt".utf8)
        let object = try json(change(.renamed, FileSystemPath(bytes: bytes), old: FileSystemPath(bytes: [0x2F, 0xE9])))
        #expect(object["path"] as? String == "/d/bad-\u{FFFD}\u{FFFD}\u{FFFD}.txt")
        let encoded = try #require(object["pathBytes"] as? String)
        #expect(Data(base64Encoded: encoded).map(Array.init) == bytes)
        #expect(Data(base64Encoded: try #require(object["oldPathBytes"] as? String)).map(Array.init) == [0x2F, 0xE9])
        #expect(try json(change(.created, "/d/fine"))["pathBytes"] == nil, "only when needed")
    }

    @Test func testBase64MatchesFoundation() {
        for length in 0..<20 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            var ours: [UInt8] = []
            Escaping.base64(bytes, into: &ours)
            #expect(String(decoding: ours, as: UTF8.self) == Data(bytes).base64EncodedString())
        }
    }
}
