import Foundation

/// One of fsnotify's test scripts, parsed: commands, then the expected events per platform.
///
/// The DSL is fsnotify's (`helpers_test.go`): command lines, a line `Output:`, then one expected
/// event per line (`OP[|OP] PATH`, or `OP PATH ← OLDPATH`), `no-events` or `empty` for none. A
/// line ending in `:` (`linux:`, `linux, windows:`) starts a block that replaces the default
/// block on those platforms. `#` starts a comment anywhere; `"` and `'` quote arguments. A script
/// without an `Output:` line expects no events.
struct FsnotifyScript {
    struct Command {
        let line: Int
        let words: [String]
    }

    /// The script's path inside the corpus, such as `watch-dir/rename-file`.
    let name: String
    let commands: [Command]
    /// The expected events per platform block; "" is the default block.
    let blocks: [String: [FsnotifyEvent]]

    /// What Linux expects: the `linux` block when there is one, else the default block.
    var expectedOnLinux: [FsnotifyEvent] { blocks["linux"] ?? blocks[""] ?? [] }
    var hasLinuxBlock: Bool { blocks["linux"] != nil }

    struct ParseError: Error, CustomStringConvertible {
        let description: String
    }

    init(name: String, text: String) throws {
        self.name = name
        var commands: [Command] = []
        var blocks: [String: [FsnotifyEvent]] = ["": []]
        var groups = [""]
        var inOutput = false
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = Substring(rawLine)
            if let hash = line.firstIndex(of: "#") { line = line[..<hash] }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            if !inOutput {
                if trimmed == "Output:" {
                    inOutput = true
                } else {
                    commands.append(Command(line: index + 1, words: try Self.words(trimmed, line: index + 1)))
                }
                continue
            }
            if trimmed.hasSuffix(":") {
                groups = trimmed.dropLast().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                for group in groups where blocks[group] == nil { blocks[group] = [] }
                continue
            }
            if trimmed == "no-events" || trimmed.lowercased() == "empty" {
                for group in groups { blocks[group] = [] }
                continue
            }
            let event = try FsnotifyEvent(expected: trimmed, line: index + 1)
            for group in groups { blocks[group, default: []].append(event) }
        }
        // A script without `Output:` expects no events (fsnotify's `watchlist`-only scripts).
        self.commands = commands
        self.blocks = blocks
    }

    /// Splits a command line into words; `"` and `'` quote.
    static func words(_ line: String, line number: Int) throws -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var quote: Character?
        for character in line {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
                inWord = true
            } else if character == " " || character == "\t" {
                if inWord { words.append(current) }
                current = ""
                inWord = false
            } else {
                current.append(character)
                inWord = true
            }
        }
        if quote != nil { throw ParseError(description: "line \(number): unterminated quote") }
        if inWord { words.append(current) }
        return words
    }
}

/// One event as fsnotify prints it: its operations, the path relative to the script's directory
/// (`/` is that directory), and for a rename's second half the path it came from.
struct FsnotifyEvent: Hashable, Comparable, CustomStringConvertible {
    /// fsnotify's operations in the order its `Op.String()` lists them.
    static let operations = [
        "create", "write", "remove", "rename", "chmod", "open", "read", "close_write", "close_read",
    ]

    var ops: Set<String>
    var path: String
    var renamedFrom: String?

    init(_ op: String, _ path: String, from renamedFrom: String? = nil) {
        self.ops = [op]
        self.path = path
        self.renamedFrom = renamedFrom
    }

    /// Parses an expected line: `create /pear ← /apple`, `write|chmod /file`.
    init(expected line: String, line number: Int) throws {
        let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        var index = 0
        var ops: Set<String> = []
        while index < fields.count - 1, fields[index + 1] != "←" {
            for op in fields[index].split(separator: "|") where !op.isEmpty {
                let name = op.lowercased()
                guard Self.operations.contains(name) else {
                    throw FsnotifyScript.ParseError(description: "line \(number): unknown operation \(op)")
                }
                ops.insert(name)
            }
            index += 1
        }
        guard index < fields.count, !ops.isEmpty else {
            throw FsnotifyScript.ParseError(description: "line \(number): expected `OP PATH`: \(line)")
        }
        self.ops = ops
        self.path = fields[index].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        if index + 2 < fields.count, fields[index + 1] == "←" {
            renamedFrom = fields[index + 2].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        } else if index + 1 < fields.count {
            throw FsnotifyScript.ParseError(description: "line \(number): unexpected words after the path: \(line)")
        }
    }

    var description: String {
        let op = Self.operations.filter { ops.contains($0) }.joined(separator: "|")
        if let renamedFrom { return "\(op) \(path) ← \(renamedFrom)" }
        return "\(op) \(path)"
    }

    static func < (lhs: FsnotifyEvent, rhs: FsnotifyEvent) -> Bool {
        lhs.description < rhs.description
    }
}
