import DirectoryWatcher

/// How paths are written so that no file name can move the cursor or forge a line.
enum Escaping {
    /// A path for the terminal: printable UTF-8 as is; `\` as `\\`; `\n`, `\t`, `\r`; other control
    /// characters, Unicode line separators and bidirectional overrides as `\u{XXXX}`; bytes that
    /// are not UTF-8 as `\xNN`; the `>` of ` ->` as `\u{3E}`, so that the only ` -> ` on a line is
    /// a rename's separator (a name ending in ` ->` would make a second one with it). Unambiguous:
    /// every backslash in the output starts an escape.
    static func text<Sink: ByteSink>(_ path: FileSystemPath, into output: inout Sink) {
        let bytes = path.bytes
        // A `>` goes the slow way, which looks at the bytes before it: rare in names.
        if isPlain(bytes, except: UInt8(ascii: ">")) {
            output.appendBytes(bytes)
            return
        }
        var escaped: [UInt8] = []
        escapedText(bytes, into: &escaped)
        output.appendBytes(escaped)
    }

    /// ``text(_:into:)`` for a path that is not plain.
    private static func escapedText(_ bytes: [UInt8], into output: inout [UInt8]) {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte < 0x80 {
                switch byte {
                case UInt8(ascii: "\\"): output += Array(#"\\"#.utf8)
                case UInt8(ascii: "\n"): output += Array(#"\n"#.utf8)
                case UInt8(ascii: "\t"): output += Array(#"\t"#.utf8)
                case UInt8(ascii: "\r"): output += Array(#"\r"#.utf8)
                case 0..<0x20, 0x7F: output += Array("\\u{\(hex(UInt32(byte), width: 2))}".utf8)
                case UInt8(ascii: ">")
                where index >= 2 && bytes[index - 1] == UInt8(ascii: "-") && bytes[index - 2] == UInt8(ascii: " "):
                    output += Array(#"\u{3E}"#.utf8)
                default: output.append(byte)
                }
                index += 1
                continue
            }
            guard let (scalar, length) = decodeScalar(bytes, at: index) else {
                output += Array("\\x\(hex(UInt32(byte), width: 2))".utf8)
                index += 1
                continue
            }
            if isUnsafeForTerminal(scalar) {
                output += Array("\\u{\(hex(scalar.value, width: 4))}".utf8)
            } else {
                output += bytes[index..<index + length]
            }
            index += length
        }
    }

    /// A JSON string literal (with quotes) for `text`: `"` and `\` escaped; control characters
    /// (C0, DEL, C1), U+2028/U+2029 and the bidirectional controls (U+061C, U+200E, U+200F,
    /// U+202A–U+202E, U+2066–U+2069) as `\uXXXX`. Still the same string once parsed, but a
    /// consumer that prints it raw cannot be made to break the line (U+2028 is a line break in
    /// JavaScript) or show a name reordered (`exe.txt` shown as `txt.exe`).
    static func jsonString(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""): output += Array(#"\""#.utf8)
            case UInt8(ascii: "\\"): output += Array(#"\\"#.utf8)
            case UInt8(ascii: "\n"): output += Array(#"\n"#.utf8)
            case UInt8(ascii: "\t"): output += Array(#"\t"#.utf8)
            case UInt8(ascii: "\r"): output += Array(#"\r"#.utf8)
            case 0..<0x20, 0x7F: output += Array("\\u\(hex(UInt32(byte), width: 4))".utf8)
            case 0xC2, 0xD8, 0xE2:
                // The lead bytes of every escaped scalar above U+007F: `text` is valid UTF-8, so
                // the scalar is decoded from its two or three bytes without checks.
                let length = byte == 0xE2 ? 3 : 2
                var value = UInt32(byte & (length == 3 ? 0x0F : 0x1F))
                for continuation in bytes[index + 1..<index + length] {
                    value = value << 6 | UInt32(continuation & 0x3F)
                }
                if let scalar = Unicode.Scalar(value), isUnsafeForTerminal(scalar) {
                    output += Array("\\u\(hex(value, width: 4))".utf8)
                } else {
                    output += bytes[index..<index + length]
                }
                index += length - 1
            default: output.append(byte)
            }
            index += 1
        }
        output.append(UInt8(ascii: "\""))
    }

    /// JSON for a path: `"key":"…"`, and when the path is not valid UTF-8, also
    /// `"keyBytes":"<base64 of the exact bytes>"` (the text then shows U+FFFD for those bytes).
    static func jsonPath(key: StaticString, _ path: FileSystemPath, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        output.append(key)
        output.append("\":")
        // Most paths are printable ASCII with no quote or backslash: copied as they are, with no
        // string made (each path would be validated as UTF-8 and copied twice).
        if isPlain(path.bytes, except: UInt8(ascii: "\"")) {
            output.append(UInt8(ascii: "\""))
            output += path.bytes
            output.append(UInt8(ascii: "\""))
            return
        }
        jsonPathValue(key: key, path, into: &output)
    }

    /// The value of ``jsonPath(key:_:into:)``, after its `"key":`: the path as a JSON string, and
    /// when it is not valid UTF-8, `,"keyBytes":"…"` after it.
    static func jsonPathValue(key: StaticString, _ path: FileSystemPath, into output: inout [UInt8]) {
        if let text = path.string {
            jsonString(text, into: &output)
        } else {
            jsonString(String(decoding: path.bytes, as: UTF8.self), into: &output)
            output.append(",\"")
            output.append(key)
            output.append("Bytes\":\"")
            base64(path.bytes, into: &output)
            output.append(UInt8(ascii: "\""))
        }
    }

    /// Whether every byte is printable ASCII other than a backslash and `other`: such bytes
    /// are written as they are. Checked eight bytes at a time: every path of every change is
    /// checked, and a byte at a time this was a tenth of dirwatch's work per line (callgrind).
    static func isPlain(_ bytes: [UInt8], except other: UInt8) -> Bool {
        bytes.withUnsafeBytes { raw in
            var index = 0
            while index + 8 <= raw.count {
                if !isPlain(word: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self), except: other) {
                    return false
                }
                index += 8
            }
            while index < raw.count {
                let byte = raw[index]
                if byte < 0x20 || byte >= 0x7F || byte == UInt8(ascii: "\\") || byte == other { return false }
                index += 1
            }
            return true
        }
    }

    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Whether each of the eight bytes of `word` is plain: none has its high bit set, none is
    /// below 0x20, none is DEL, `\` or `other`. (The tests `(x - 0x01…) & ~x & 0x80…`, nonzero
    /// exactly when some byte of x is zero, and its form for bytes below n, are exact as a
    /// whole once no byte has its high bit set.)
    static func isPlain(word: UInt64, except other: UInt8) -> Bool {
        guard word & highs == 0 else { return false }
        func hasZero(_ value: UInt64) -> Bool { (value &- ones) & ~value & highs != 0 }
        if (word &- ones &* 0x20) & ~word & highs != 0 { return false }
        return !hasZero(word ^ (ones &* 0x7F)) && !hasZero(word ^ (ones &* UInt64(UInt8(ascii: "\\"))))
            && !hasZero(word ^ (ones &* UInt64(other)))
    }

    static func base64(_ bytes: [UInt8], into output: inout [UInt8]) {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value: UInt32 = 0
            for (offset, byte) in chunk.enumerated() { value |= UInt32(byte) << (16 - 8 * UInt32(offset)) }
            for position in 0..<4 {
                if position <= chunk.count {
                    output.append(alphabet[Int((value >> (18 - 6 * UInt32(position))) & 0x3F)])
                } else {
                    output.append(UInt8(ascii: "="))
                }
            }
            index += 3
        }
    }

    /// Scalars that could reorder or break what a terminal shows: C1 controls, line and paragraph
    /// separators, bidirectional embeddings, overrides and isolates. Both formats escape them.
    private static func isUnsafeForTerminal(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x80...0x9F, 0x2028, 0x2029, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x061C: return true
        default: return false
        }
    }

    /// The valid UTF-8 scalar starting at `index`, with its length in bytes.
    private static func decodeScalar(_ bytes: [UInt8], at index: Int) -> (Unicode.Scalar, Int)? {
        let lead = bytes[index]
        let length: Int
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0...0xEF: length = 3
        case 0xF0...0xF4: length = 4
        default: return nil
        }
        guard index + length <= bytes.count,
            let text = String(validating: bytes[index..<index + length], as: UTF8.self),
            let scalar = text.unicodeScalars.first
        else { return nil }
        return (scalar, length)
    }

    static func hex(_ value: UInt32, width: Int) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
