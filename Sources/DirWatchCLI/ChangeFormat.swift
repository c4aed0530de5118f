import DirectoryWatcher

/// The two output formats, each one line per change.
public enum ChangeFormat {
    /// `kind path` (or `renamed old -> new`), directories with a trailing `/`, names escaped
    /// (see `Escaping.text`), `  (rescan)` after a change found by a rescan, and `  (why)` after
    /// a `failed` directory (one that could not be watched or listed). With `color`, the kind is
    /// coloured with ANSI escapes.
    public static func text(_ change: DirectoryChange, color: Bool, into output: inout [UInt8]) {
        let kind = change.kind.rawValue
        if color { output += Array("\u{1B}[\(colorCode(change.kind))m".utf8) }
        output += Array(kind.utf8)
        if color { output += Array("\u{1B}[0m".utf8) }
        output += [UInt8](repeating: UInt8(ascii: " "), count: max(1, 18 - kind.utf8.count))
        if let oldPath = change.oldPath {
            Escaping.text(oldPath, into: &output)
            if change.isDirectory { output.append(UInt8(ascii: "/")) }
            output += Array(" -> ".utf8)
        }
        Escaping.text(change.path, into: &output)
        if change.isDirectory && change.path.bytes != [UInt8(ascii: "/")] { output.append(UInt8(ascii: "/")) }
        if change.foundByRescan { output += Array("  (rescan)".utf8) }
        if let error = change.error { output += Array("  (\(error.reason))".utf8) }
        output.append(UInt8(ascii: "\n"))
    }

    /// `{"kind":…,"path":…,"isDirectory":…[,"oldPath":…][,"foundByRescan":true][,"error":…]}` and
    /// a newline (`foundByRescan` for a change found by listing the directory again after an
    /// `overflow`; `error`, the cause, on a `failed` directory). Every line is valid JSON;
    /// a path that is not UTF-8 also comes as `pathBytes` / `oldPathBytes` in base64.
    public static func json(_ change: DirectoryChange, into output: inout [UInt8]) {
        output += Array("{\"kind\":\"\(change.kind.rawValue)\",".utf8)
        Escaping.jsonPath(key: "path", change.path, into: &output)
        output += Array(",\"isDirectory\":\(change.isDirectory)".utf8)
        if let oldPath = change.oldPath {
            output.append(UInt8(ascii: ","))
            Escaping.jsonPath(key: "oldPath", oldPath, into: &output)
        }
        if change.foundByRescan { output += Array(",\"foundByRescan\":true".utf8) }
        if let error = change.error {
            output += Array(",\"error\":".utf8)
            Escaping.jsonString(error.reason, into: &output)
        }
        output += Array("}\n".utf8)
    }

    private static func colorCode(_ kind: DirectoryChange.Kind) -> String {
        switch kind {
        case .created, .movedIn: return "32"  // green
        case .removed, .movedOut: return "31"  // red
        case .modified: return "33"  // yellow
        case .attributesChanged: return "35"  // magenta
        case .renamed, .exchanged: return "36"  // cyan
        case .opened, .accessed, .writerClosed, .readerClosed: return "34"  // blue
        case .rootRemoved, .rootMoved, .overflow, .failed: return "1;31"  // bold red
        @unknown default: return "0"
        }
    }
}
