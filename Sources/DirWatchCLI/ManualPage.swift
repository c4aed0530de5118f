/// `dirwatch`'s man page, made from its manual (Docs/DirectoryWatcher.docc/Dirwatch.md) so that
/// the two never disagree: `swift run dirwatch-docs` writes Docs/man/dirwatch.1, and a test fails
/// when the committed page is not what the committed manual makes.
///
/// It reads the Markdown the manual is written in, not all of Markdown: `#` headings, paragraphs,
/// fenced code blocks, `-` and numbered lists, tables, block quotes; within them code spans,
/// `**bold**`, `*italic*`, links, DocC's `<doc:Article>` links and ``` ``Symbol`` ``` references.
/// The page uses man(7)'s macros alone, no tbl, and no date, so the same manual always makes the
/// same page.
public enum ManualPage {
    /// The man page, in roff, for the manual `markdown`.
    ///
    /// Its title, `# dirwatch(1)`, names the page and its section; the paragraph under it is the
    /// NAME line; each `##` is a section (upper-cased, as man pages have them) and each `###` a
    /// subsection. A list item that starts with code spans and a colon (`` - `-f FILE`, `--file
    /// FILE`: ... ``) is a tagged paragraph, as man pages list options; a table's rows are tagged
    /// paragraphs too, by their first cell.
    public static func roff(fromManual markdown: String) -> String {
        var page = Page()
        var blocks = Self.blocks(markdown)[...]
        var name = "dirwatch"
        var section = "1"
        if case .heading(1, let title)? = blocks.first {
            blocks.removeFirst()
            // "dirwatch(1)": the name, and the section in parentheses.
            if let open = title.firstIndex(of: "("), title.hasSuffix(")") {
                name = String(title[..<open])
                section = String(title[title.index(after: open)..<title.index(before: title.endIndex)])
            } else {
                name = title
            }
        }
        page.lines.append(#".\" Made from Docs/DirectoryWatcher.docc/Dirwatch.md by `swift run dirwatch-docs`:"#)
        page.lines.append(#".\" edit the manual, not this page."#)
        let source = versionLine(commit: "").prefix { $0 != "(" }.trimmingSpaces()
        page.lines.append(".TH \(quoted(name.uppercased())) \(quoted(section)) \"\" \(quoted(source))")
        page.lines.append(".SH NAME")
        var summary = ""
        if case .paragraph(let text)? = blocks.first {
            blocks.removeFirst()
            summary = inline(text)
            // As whatis lists pages: lower case, no full stop ("ls \- list directory contents").
            if summary.hasSuffix(".") { summary.removeLast() }
            let first = summary.prefix(2)
            if first.count == 2, first.last!.isLowercase {
                summary = first.prefix(1).lowercased() + summary.dropFirst()
            }
        }
        // One line: mandb reads the NAME section for whatis and apropos.
        page.lines.append(escapedLine(summary.isEmpty ? name : "\(name) \\- \(summary)"))
        var skipping = false
        for block in blocks {
            if case .heading(let level, let text) = block, level <= 2 {
                // DocC's curation: links to other pages, nothing for a man page.
                skipping = text == "Topics"
            }
            if !skipping { page.render(block) }
        }
        return page.lines.joined(separator: "\n") + "\n"
    }

    // MARK: - Blocks

    enum Block: Equatable {
        case heading(Int, String)
        case paragraph(String)
        case quote(String)
        case code([String])
        /// Items, each its lines joined; `marker` "1." and so on for a numbered list, nil for bullets.
        case list([ListItem])
        case table(header: [String], rows: [[String]])
    }

    struct ListItem: Equatable {
        var marker: String?
        var text: String
    }

    /// The manual cut into blocks.
    static func blocks(_ markdown: String) -> [Block] {
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map {
            String($0.hasSuffix("\r") ? $0.dropLast() : $0)
        }
        var blocks: [Block] = []
        var paragraph: [String] = []
        func endParagraph() {
            if !paragraph.isEmpty { blocks.append(.paragraph(paragraph.joined(separator: " "))) }
            paragraph = []
        }
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let trimmed = line.trimmingSpaces()
            if trimmed.hasPrefix("```") {
                endParagraph()
                var code: [String] = []
                index += 1
                while index < lines.count, !lines[index].trimmingSpaces().hasPrefix("```") {
                    code.append(lines[index])
                    index += 1
                }
                index += 1
                blocks.append(.code(code))
            } else if trimmed.isEmpty {
                endParagraph()
                index += 1
            } else if trimmed.hasPrefix("<!--") {
                // A comment, for the documentation's tools (snippet markers): not for readers.
                endParagraph()
                while index < lines.count, !lines[index].contains("-->") { index += 1 }
                index += 1
            } else if trimmed.hasPrefix("@"), trimmed.hasSuffix("{") {
                // A DocC directive (@Metadata { ... }): not for readers either.
                endParagraph()
                while index < lines.count, lines[index].trimmingSpaces() != "}" { index += 1 }
                index += 1
            } else if let level = headingLevel(trimmed) {
                endParagraph()
                blocks.append(.heading(level, String(trimmed.dropFirst(level)).trimmingSpaces()))
                index += 1
            } else if trimmed.hasPrefix("|") {
                endParagraph()
                var rows: [[String]] = []
                while index < lines.count, lines[index].trimmingSpaces().hasPrefix("|") {
                    rows.append(cells(lines[index].trimmingSpaces()))
                    index += 1
                }
                let header = rows.first ?? []
                var body = Array(rows.dropFirst())
                // The line of dashes under the header.
                if let rule = body.first, rule.allSatisfy({ $0.allSatisfy { "-: ".contains($0) } }) {
                    body.removeFirst()
                }
                blocks.append(.table(header: header, rows: body))
            } else if listMarker(line) != nil {
                endParagraph()
                var items: [ListItem] = []
                while index < lines.count {
                    let line = lines[index]
                    if let (marker, text) = listMarker(line) {
                        items.append(ListItem(marker: marker, text: text))
                    } else if line.hasPrefix(" "), !line.trimmingSpaces().isEmpty, !items.isEmpty {
                        items[items.count - 1].text += " " + line.trimmingSpaces()
                    } else {
                        break
                    }
                    index += 1
                }
                blocks.append(.list(items))
            } else if trimmed.hasPrefix(">") {
                endParagraph()
                var quote: [String] = []
                while index < lines.count, lines[index].trimmingSpaces().hasPrefix(">") {
                    quote.append(String(lines[index].trimmingSpaces().dropFirst()).trimmingSpaces())
                    index += 1
                }
                blocks.append(.quote(quote.joined(separator: " ")))
            } else {
                paragraph.append(trimmed)
                index += 1
            }
        }
        endParagraph()
        return blocks
    }

    /// 1 for `# `, 2 for `## `, and so on; nil for a line that is no heading.
    static func headingLevel(_ line: String) -> Int? {
        let hashes = line.prefix { $0 == "#" }.count
        guard (1...6).contains(hashes), line.dropFirst(hashes).first == " " else { return nil }
        return hashes
    }

    /// A list item's marker (nil for `- ` and `* `, "3." for `3. `) and its text.
    static func listMarker(_ line: String) -> (String?, String)? {
        if line.hasPrefix("- ") || line.hasPrefix("* ") { return (nil, String(line.dropFirst(2)).trimmingSpaces()) }
        let digits = line.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, line.dropFirst(digits.count).hasPrefix(". ") else { return nil }
        return (digits + ".", String(line.dropFirst(digits.count + 2)).trimmingSpaces())
    }

    /// A table row's cells: between its pipes, but not at `\|`, which is a pipe in the cell.
    static func cells(_ row: String) -> [String] {
        var cells: [String] = []
        var cell = ""
        var escaped = false
        for character in row {
            if escaped {
                cell += character == "|" ? "|" : "\\" + String(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "|" {
                cells.append(cell.trimmingSpaces())
                cell = ""
            } else {
                cell.append(character)
            }
        }
        if escaped { cell += "\\" }
        cells.append(cell.trimmingSpaces())
        // The row's first and last pipes have nothing outside them.
        if cells.first == "" { cells.removeFirst() }
        if cells.last == "" { cells.removeLast() }
        return cells
    }

    // MARK: - Rendering

    /// The page as it is written: its lines, and whether a paragraph macro is needed before the
    /// next block (not right after a heading, where it would be an empty paragraph).
    struct Page {
        var lines: [String] = []
        var atSectionStart = true

        mutating func paragraphBreak() {
            if !atSectionStart { lines.append(".PP") }
            atSectionStart = false
        }

        mutating func text(_ roff: String) {
            lines += ManualPage.fill(roff)
        }

        mutating func render(_ block: Block) {
            switch block {
            case .heading(let level, let text):
                if level <= 2 {
                    lines.append(".SH " + ManualPage.quoted(ManualPage.inline(ManualPage.upperCasedOutsideCode(text))))
                } else {
                    lines.append(".SS " + ManualPage.quoted(ManualPage.inline(text)))
                }
                atSectionStart = true
            case .paragraph(let text):
                paragraphBreak()
                self.text(ManualPage.inline(text))
            case .quote(let text):
                paragraphBreak()
                lines.append(".RS 4")
                self.text(ManualPage.inline(text))
                lines.append(".RE")
            case .code(let code):
                paragraphBreak()
                lines += [".RS 4", ".nf"]
                lines += code.map { ManualPage.escapedLine($0.isEmpty ? "" : ManualPage.escapedCode($0)) }
                lines += [".fi", ".RE"]
            case .list(let items):
                for item in items {
                    if item.marker == nil, let (tag, body) = ManualPage.term(item.text) {
                        lines += [".TP", ManualPage.escapedLine(tag)]
                        self.text(body)
                    } else {
                        let marker = item.marker.map { "\($0) \($0.count + 2)" } ?? "\\(bu 2"
                        lines.append(".IP " + marker)
                        self.text(ManualPage.inline(item.text))
                    }
                }
                atSectionStart = false
            case .table(let header, let rows):
                // No tbl: each row a tagged paragraph, its first cell the tag; the further cells of
                // a wider table named by their column, those of a two-column one under its header.
                if header.count == 2 {
                    let names = header.map { "\\fI" + ManualPage.escapedText($0.filter { $0 != "`" }) + "\\fR" }
                    lines += [".TP", ManualPage.escapedLine(names[0])]
                    self.text(names[1])
                }
                for row in rows {
                    lines.append(".TP")
                    let tag = row.first.map(ManualPage.inline) ?? ""
                    lines.append(ManualPage.escapedLine(tag.isEmpty ? "\\(em" : tag))
                    let rest = row.dropFirst().enumerated().filter { !$0.element.isEmpty }
                    let body: String
                    if header.count <= 2 {
                        body = rest.map { ManualPage.inline($0.element) }.joined(separator: "; ")
                    } else {
                        body = rest.map { column, cell in
                            let name = column + 1 < header.count ? header[column + 1] : ""
                            let label = ManualPage.escapedText(name.filter { $0 != "`" })
                            return "\\fI\(label):\\fR " + ManualPage.inline(cell)
                        }.joined(separator: "; ")
                    }
                    self.text(body.isEmpty ? "\\&" : body)
                }
                atSectionStart = false
            }
        }
    }

    /// A list item that names something and then says what it is: `` `-f FILE`, `--file FILE`:
    /// text ``, code spans separated by commas or semicolons, then a colon. Its tag in roff (an
    /// option's name in bold, its value in italics) and its text; nil for any other item.
    static func term(_ item: String) -> (tag: String, body: String)? {
        var rest = Substring(item)
        var tag = ""
        while true {
            guard rest.hasPrefix("`"), !rest.hasPrefix("``") else { return nil }
            let code = rest.dropFirst()
            guard let close = code.firstIndex(of: "`"), close > code.startIndex else { return nil }
            let span = String(code[..<close])
            rest = code[code.index(after: close)...]
            if span.hasPrefix("-"), let space = span.firstIndex(of: " ") {
                tag +=
                    "\\fB" + escapedCode(String(span[..<space])) + "\\fR \\fI"
                    + escapedCode(String(span[span.index(after: space)...])) + "\\fR"
            } else {
                tag += "\\fB" + escapedCode(span) + "\\fR"
            }
            if rest.hasPrefix(": ") {
                return (tag, inline(String(rest.dropFirst(2)).trimmingSpaces()))
            }
            guard rest.hasPrefix(", ") || rest.hasPrefix("; ") else { return nil }
            tag += String(rest.prefix(2))
            rest = rest.dropFirst(2)
        }
    }

    // MARK: - Inline

    /// A paragraph's Markdown as roff text, on one line: code spans and symbols in bold, bold and
    /// italics, links as their text, `<doc:Name>` as the article it names.
    static func inline(_ markdown: String) -> String {
        var characters = Array(markdown)
        var out = ""
        var bold = false
        var italic = false
        // Whether the last character written is a hyphen of an option's name.
        var optionHyphen = false
        func font(bold: Bool, italic: Bool) -> String {
            switch (bold, italic) {
            case (false, false): "\\fR"
            case (true, false): "\\fB"
            case (false, true): "\\fI"
            case (true, true): "\\f(BI"
            }
        }
        func find(_ target: String, from start: Int) -> Int? {
            let target = Array(target)
            var index = start
            while index + target.count <= characters.count {
                if Array(characters[index..<(index + target.count)]) == target { return index }
                index += 1
            }
            return nil
        }
        // Code in bold, whatever the font around it, and back.
        func code(_ text: String) {
            out += (bold ? "" : font(bold: true, italic: italic)) + escapedCodeSpan(text)
            if !bold { out += font(bold: false, italic: italic) }
        }
        // Whether a sentence starts here: nothing but spaces before, or a full stop.
        func sentenceStarts(at index: Int) -> Bool {
            let before = characters[..<index].reversed().drop { $0 == " " }
            return before.first.map { ".!?".contains($0) } ?? true
        }
        // `*word*`: a star before a word, with another after it.
        func opensItalic(at index: Int) -> Bool {
            guard index + 1 < characters.count, characters[index + 1] != " " else { return false }
            return find("*", from: index + 2) != nil
        }
        var index = 0
        while index < characters.count {
            let character = characters[index]
            let next = index + 1 < characters.count ? characters[index + 1] : nil
            var wroteOptionHyphen = false
            defer { optionHyphen = wroteOptionHyphen }
            if character == "`", next == "`", let close = find("``", from: index + 2) {
                // ``DirectoryWatcher/Options/recursive``: a symbol, by its last name.
                let symbol = String(characters[(index + 2)..<close])
                code(symbol.split(separator: "/").last.map(String.init) ?? symbol)
                index = close + 2
            } else if character == "`", let close = find("`", from: index + 1) {
                code(String(characters[(index + 1)..<close]))
                index = close + 1
            } else if character == "*", next == "*", bold || find("**", from: index + 2) != nil {
                bold.toggle()
                out += font(bold: bold, italic: italic)
                index += 2
            } else if character == "*", italic ? characters[index - 1] != " " : opensItalic(at: index) {
                italic.toggle()
                out += font(bold: bold, italic: italic)
                index += 1
            } else if character == "<", let close = find(">", from: index + 1),
                String(characters[(index + 1)..<close]).hasPrefix("doc:")
            {
                // Replaced by its words, which are then read as text.
                let target = String(characters[(index + 5)..<close]).prefix { $0 != "#" }
                let article = target.split(separator: "/").last.map(String.init) ?? String(target)
                let words = (sentenceStarts(at: index) ? "The " : "the ") + article + " article of the documentation"
                characters.replaceSubrange(index...close, with: Array(words))
            } else if character == "<", let close = find(">", from: index + 1),
                String(characters[(index + 1)..<close]).contains("://")
            {
                characters.replaceSubrange(index...close, with: characters[(index + 1)..<close])
            } else if character == "[", let middle = find("](", from: index + 1),
                let close = find(")", from: middle + 2)
            {
                // [text](destination): the text; a web address after it, in parentheses.
                let destination = String(characters[(middle + 2)..<close])
                var words = Array(characters[(index + 1)..<middle])
                if destination.contains("://") { words += Array(" (\(destination))") }
                characters.replaceSubrange(index...close, with: words)
            } else if character == "\\", let next, next.isASCII, next.isPunctuation || next.isSymbol {
                // A Markdown escape: the character itself.
                out += escapedText(String(next))
                index += 2
            } else if character == "-" {
                // An option's name (-f, --file): a minus, as it is typed, not a hyphen.
                let previous = index > 0 ? characters[index - 1] : " "
                let startsName = optionHyphen || " ([\"'/".contains(previous)
                if startsName, let next, next == "-" || (next.isASCII && (next.isLetter || next.isNumber)) {
                    out += "\\-"
                    wroteOptionHyphen = true
                } else {
                    out += "-"
                }
                index += 1
            } else if character == " " || character == "\t" {
                if !out.hasSuffix(" ") && !out.isEmpty { out += " " }
                index += 1
            } else {
                out += escapedText(String(character))
                index += 1
            }
        }
        if bold || italic { out += "\\fR" }
        return out.trimmingSpaces()
    }

    /// Plain text for roff: backslashes and characters beyond ASCII as escapes.
    static func escapedText(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar == "\\" {
                out += "\\e"
            } else if !scalar.isASCII {
                out += unicodeEscape(scalar)
            } else if scalar.value < 0x20 || scalar.value == 0x7F {
                out += " "
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Code for roff, to be typed as it shows: minus signs, not hyphens; ASCII quotes, grave
    /// accent, tilde and caret, which groff would otherwise turn into typographic ones.
    static func escapedCode(_ code: String) -> String {
        var out = ""
        for scalar in code.unicodeScalars {
            switch scalar {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            case "'": out += "\\(aq"
            case "`": out += "\\(ga"
            case "~": out += "\\(ti"
            case "^": out += "\\(ha"
            case "\t": out += "    "
            default:
                if !scalar.isASCII {
                    out += unicodeEscape(scalar)
                } else if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += " "
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    /// A code span for a filled line: its words never hyphenated (`\%`), the line broken only at
    /// a single space between two of them; spaces at its ends or in a run (aligned columns, ` -> `)
    /// kept as they are, unbreakable.
    static func escapedCodeSpan(_ span: String) -> String {
        var text = Array(span)
        // As CommonMark reads `` ` a ` ``: one space off each end when both have one.
        if text.count > 2, text.first == " ", text.last == " ", text.contains(where: { $0 != " " }) {
            text = Array(text.dropFirst().dropLast())
        }
        var out = "\\%"
        var word = ""
        for (index, character) in text.enumerated() {
            guard character == " " else {
                word.append(character)
                continue
            }
            out += escapedCode(word)
            word = ""
            let between = index > 0 && index + 1 < text.count && text[index - 1] != " " && text[index + 1] != " "
            out += between ? " \\%" : "\\ "
        }
        return out + escapedCode(word)
    }

    /// groff's name for a character: `\[u00E9]`; three full stops for an ellipsis, for which
    /// groff has no ASCII fallback (a man page read in the C locale would warn).
    static func unicodeEscape(_ scalar: Unicode.Scalar) -> String {
        if scalar == "\u{2026}" { return "..." }
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
    }

    /// A text line that roff does not take for a request: one starting with `.` or `'` gets `\&`
    /// first; an empty one is `\&` alone, not a blank line, which would be a paragraph break.
    static func escapedLine(_ line: String) -> String {
        line.isEmpty || line.hasPrefix(".") || line.hasPrefix("'") ? "\\&" + line : line
    }

    /// A macro's argument: in double quotes when it has a space, its own quotes escaped.
    static func quoted(_ argument: String) -> String {
        let escaped = argument.replacing("\"", with: "\\(dq")
        return escaped.contains(" ") || escaped.isEmpty ? "\"\(escaped)\"" : escaped
    }

    /// A heading in capitals, its code spans as written (an option's name keeps its case).
    static func upperCasedOutsideCode(_ text: String) -> String {
        text.split(separator: "`", omittingEmptySubsequences: false).enumerated().map { index, part in
            index.isMultiple(of: 2) ? part.uppercased() : String(part)
        }.joined(separator: "`")
    }

    /// Roff text cut into lines: a new line for each sentence (groff leaves a wider space after
    /// a full stop only at a line's end), and within one at the last space that keeps the line at
    /// most 80 characters. Never at `\ `, an unbreakable space.
    static func fill(_ roff: String) -> [String] {
        var words: [String] = []
        var word = ""
        var previous: Character = " "
        for character in roff {
            if character == " ", previous != "\\" {
                if !word.isEmpty { words.append(word) }
                word = ""
            } else {
                word.append(character)
            }
            previous = character == "\\" && previous == "\\" ? " " : character
        }
        if !word.isEmpty { words.append(word) }
        var lines: [String] = []
        var line = ""
        for (index, word) in words.enumerated() {
            if line.isEmpty {
                line = word
            } else if line.count + 1 + word.count <= 80 {
                line += " " + word
            } else {
                lines.append(line)
                line = word
            }
            let next = index + 1 < words.count ? words[index + 1] : nil
            // A capital, or a code span, after a full stop: a new sentence.
            if endsSentence(word), let next, next.first?.isUppercase ?? false || next.hasPrefix("\\f") {
                lines.append(line)
                line = ""
            }
        }
        if !line.isEmpty { lines.append(line) }
        return lines.map(escapedLine)
    }

    /// Whether a word ends a sentence: a full stop, question or exclamation mark at its end, or
    /// before closing quotes or parentheses.
    static func endsSentence(_ word: String) -> Bool {
        let end = word.reversed().drop { "\")]'".contains($0) }
        return end.first.map { ".!?".contains($0) } ?? false
    }
}

extension StringProtocol {
    /// Without the spaces at either end.
    func trimmingSpaces() -> String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
