import Foundation
import Testing

@testable import DirWatchCLI

/// The man page: what ``ManualPage/roff(fromManual:)`` makes of Markdown, the committed page
/// against the committed manual, and the page as `man` renders it.
@Suite struct ManualPageTests {
    /// The package's root, from this file's place in it.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let manualPath = root.appendingPathComponent("Docs/DirectoryWatcher.docc/Dirwatch.md").path
    static let pagePath = root.appendingPathComponent("Docs/man/dirwatch.1").path

    static func committedPage() throws -> String { try String(contentsOfFile: pagePath, encoding: .utf8) }

    /// The page made from a manual of `body` under a title and a NAME paragraph, from its first
    /// section on: what a test of one construct looks at.
    static func page(_ body: String) -> String {
        let page = ManualPage.roff(fromManual: "# tool(1)\n\nDo a thing.\n\n## Section\n\n" + body)
        let start = page.range(of: ".SH SECTION\n")!
        return String(page[start.upperBound...])
    }

    @Test func testTheCommittedPageIsWhatTheManualMakes() throws {
        let manual = try String(contentsOfFile: Self.manualPath, encoding: .utf8)
        let made = ManualPage.roff(fromManual: manual)
        let committed = try Self.committedPage()
        guard made != committed else { return }
        let lines = made.split(separator: "\n", omittingEmptySubsequences: false)
        let old = committed.split(separator: "\n", omittingEmptySubsequences: false)
        let first = Array(zip(lines, old)).firstIndex { $0 != $1 } ?? min(lines.count, old.count)
        Issue.record(
            """
            Docs/man/dirwatch.1 is not what Docs/DirectoryWatcher.docc/Dirwatch.md makes: run \
            swift run dirwatch-docs (from line \(first + 1): \
            \(first < old.count ? String(old[first]) : "end of file") \
            -> \(first < lines.count ? String(lines[first]) : "end of file"))
            """)
    }

    @Test func testTheHeaderAndNameComeFromTheTitleAndFirstParagraph() {
        let page = ManualPage.roff(fromManual: "# dirwatch(1)\n\nWatch directories from a shell.\n\n## Synopsis\n")
        let lines = page.split(separator: "\n").filter { !$0.hasPrefix(#".\""#) }
        #expect(lines.first == #".TH DIRWATCH 1 "" "dirwatch 0.1.0""#, "no date: the same manual, the same page")
        #expect(lines.dropFirst().first == ".SH NAME")
        #expect(lines.dropFirst(2).first == #"dirwatch \- watch directories from a shell"#, "as whatis lists it")
        #expect(lines.dropFirst(3).first == ".SH SYNOPSIS")
        #expect(page.hasSuffix("\n"))
        #expect(page.contains("swift run dirwatch-docs"), "the page says what it is made from")
    }

    @Test func testHeadingsAreSectionsAndSubsections() {
        let page = Self.page("Text.\n\n## Exit status\n\n### Kinds for --event\n\nMore.\n\n## Topics\n\n- <doc:A>\n")
        #expect(page.contains("\n.SH \"EXIT STATUS\"\n"))
        #expect(page.contains("\n.SS \"Kinds for \\-\\-event\"\n"))
        #expect(!page.contains("TOPICS") && !page.contains(" A "), "DocC's curation is left out")
        #expect(!page.contains(".SH \"EXIT STATUS\"\n.PP"), "no empty paragraph after a heading")
    }

    @Test func testParagraphsAreFilledOneSentenceALine() {
        let page = Self.page("One sentence here. Another one\nacross lines.\n\nA second paragraph.\n")
        #expect(page == "One sentence here.\nAnother one across lines.\n.PP\nA second paragraph.\n")
        let long = Self.page(String(repeating: "word ", count: 40))
        for line in long.split(separator: "\n") { #expect(line.count <= 80) }
    }

    @Test func testInlineMarkup() {
        #expect(ManualPage.inline("run `make -j` now") == #"run \fB\%make \%\-j\fR now"#)
        #expect(ManualPage.inline("**Batches.** and *this*") == #"\fBBatches.\fR and \fIthis\fR"#)
        #expect(ManualPage.inline("**`CODE`** in bold") == #"\fB\%CODE\fR in bold"#, "code in bold stays bold")
        #expect(ManualPage.inline("see ``DirectoryWatcher/Options/recursive``") == #"see \fB\%recursive\fR"#)
        #expect(
            ManualPage.inline("<doc:LostChangesAndRescans> tells it; see <doc:Settling#Quiet>")
                == "The LostChangesAndRescans article of the documentation tells it; see the Settling article of "
                + "the documentation")
        #expect(
            ManualPage.inline("[the README](https://example.org/r) and [a page](<doc:X>)")
                == "the README (https://example.org/r) and a page")
        #expect(ManualPage.inline("`a  b` and ` -> `") == #"\fB\%a\ \ b\fR and \fB\%\->\fR"#, "aligned spaces kept")
        #expect(ManualPage.inline("` ->` in a name") == #"\fB\%\ \->\fR in a name"#)
    }

    @Test func testRoffSpecialCharactersAreEscaped() {
        // Option names are minus signs, as typed; other hyphens stay hyphens.
        #expect(
            ManualPage.inline("a comma-separated list, -f or --file (-E)")
                == #"a comma-separated list, \-f or \-\-file (\-E)"#)
        #expect(ManualPage.inline(#"a \ and `\n`"#) == #"a \e and \fB\%\en\fR"#)
        #expect(ManualPage.inline(#"an escaped \* star"#) == "an escaped * star")
        #expect(ManualPage.inline("U+202A–U+202E, é") == #"U+202A\[u2013]U+202E, \[u00E9]"#)
        #expect(ManualPage.inline("wait …") == "wait ...", "no ASCII fallback for an ellipsis in groff")
        #expect(ManualPage.inline("`'*.o'` and `~/x`") == #"\fB\%\(aq*.o\(aq\fR and \fB\%\(ti/x\fR"#)
        // A line that would start with a control character is a text line still.
        let page = Self.page("A\n.hidden\n\n'quoted' word.\n")
        #expect(page == "A .hidden\n.PP\n\\&'quoted' word.\n")
        #expect(ManualPage.fill(".x y") == [#"\&.x y"#])
        #expect(ManualPage.fill(#"a\ b"#) == [#"a\ b"#], "never at an unbreakable space")
    }

    @Test func testCodeBlocksAreUnfilledAndEscaped() {
        let page = Self.page("Run:\n\n```sh\ndirwatch -r . --exec sh -c 'make'\n.dotfile \\n\n\n  indented\n```\n")
        #expect(
            page == """
                Run:
                .PP
                .RS 4
                .nf
                dirwatch \\-r . \\-\\-exec sh \\-c \\(aqmake\\(aq
                \\&.dotfile \\en
                \\&
                  indented
                .fi
                .RE

                """)
    }

    @Test func testListsAreBulletsOrTaggedParagraphs() {
        let page = Self.page(
            """
            - `-f FILE`, `--file FILE`: watch the file,
              by name.
            - `--`: end of options.
            - **Batches.** A batch opens.
            - plain item
            1. first
            """)
        #expect(
            page == """
                .TP
                \\fB\\-f\\fR \\fIFILE\\fR, \\fB\\-\\-file\\fR \\fIFILE\\fR
                watch the file, by name.
                .TP
                \\fB\\-\\-\\fR
                end of options.
                .IP \\(bu 2
                \\fBBatches.\\fR A batch opens.
                .IP \\(bu 2
                plain item
                .IP 1. 4
                first

                """)
    }

    @Test func testTablesAreTaggedParagraphsWithoutTbl() {
        let two = Self.page("| status | when |\n|---|---|\n| 0 | `a \\| b` done |\n")
        #expect(two == ".TP\n\\fIstatus\\fR\n\\fIwhen\\fR\n.TP\n0\n\\fB\\%a \\%| \\%b\\fR done\n")
        let three = Self.page(
            "| `dirwatch` | inotifywait | prints |\n|---|---|---|\n| `a` | `b` | c |\n| | `close` | d |\n")
        #expect(
            three == """
                .TP
                \\fB\\%a\\fR
                \\fIinotifywait:\\fR \\fB\\%b\\fR; \\fIprints:\\fR c
                .TP
                \\(em
                \\fIinotifywait:\\fR \\fB\\%close\\fR; \\fIprints:\\fR d

                """)
        #expect(!two.contains(".TS"), "no tbl preprocessor")
    }

    /// `man --warnings` of the committed page: nothing on stderr, in UTF-8 and in the C locale
    /// (where groff has ASCII fallbacks only), at the width of a terminal and of a wide one.
    @Test(
        .enabled(if: installedProgram("man") != nil, "man is not installed (Debian: apt-get install man-db groff-base)")
    )
    func testManRendersThePageWithoutWarnings() throws {
        for locale in ["C.UTF-8", "C"] {
            for width in ["80", "200"] {
                let result = try runChild(
                    installedProgram("man")!, ["--warnings", "-l", Self.pagePath],
                    environment: ["LC_ALL": locale, "MANWIDTH": width, "MANPAGER": "cat", "PAGER": "cat"])
                #expect(result.status == 0, "\(locale), \(width) columns: \(result.errors)")
                #expect(result.errors == "", "man --warnings, \(locale), \(width) columns")
                #expect(result.output.contains("--recursive"), "the options are shown")
                #expect(result.output.contains("EXIT STATUS"))
            }
        }
    }
}
