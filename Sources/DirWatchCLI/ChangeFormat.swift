import DirectoryWatcher

/// The two output formats, each one line per change.
public enum ChangeFormat {
    /// `kind path` (or `renamed old -> new`), directories with a trailing `/`, names escaped
    /// (see `Escaping.text`), `  (rescan)` after a change found by a rescan, and `  (why)` after
    /// a `failed` directory (one that could not be watched or listed). With `color`, the kind is
    /// coloured with ANSI escapes.
    public static func text<Sink: ByteSink>(_ change: DirectoryChange, color: Bool, into output: inout Sink) {
        // Fixed text is copied from static strings: an `Array(…utf8)`, an interpolation or a
        // `String`'s UTF-8 view appended would cost an allocation or a generic copy per change.
        if color {
            output.append("\u{1B}[")
            output.append(colorCode(change.kind))
            output.append("m")
        }
        let width = appendName(of: change.kind, to: &output)
        if color { output.append("\u{1B}[0m") }
        for _ in 0..<max(1, 18 - width) { output.append(UInt8(ascii: " ")) }
        if let oldPath = change.oldPath {
            Escaping.text(oldPath, into: &output)
            if change.isDirectory { output.append(UInt8(ascii: "/")) }
            output.append(" -> ")
        }
        Escaping.text(change.path, into: &output)
        if change.isDirectory && !isRoot(change.path) { output.append(UInt8(ascii: "/")) }
        if change.foundByRescan { output.append("  (rescan)") }
        if change.whileStopped { output.append("  (while stopped)") }
        if let error = change.error { output.appendBytes(Array("  (\(error.reason))".utf8)) }
        output.append(UInt8(ascii: "\n"))
    }

    /// `{"kind":…,"path":…,"isDirectory":…[,"oldPath":…][,"foundByRescan":true][,"whileStopped":true][,"error":…]}`
    /// and a newline (`foundByRescan` for a change found by listing the directory again after an
    /// `overflow`; `whileStopped` for one made while dirwatch was not running, found from
    /// `--state`; `error`, the cause, on a `failed` directory). Every line is valid JSON;
    /// a path that is not UTF-8 also comes as `pathBytes` / `oldPathBytes` in base64.
    public static func json<Sink: ByteSink>(_ change: DirectoryChange, into output: inout Sink) {
        // The fixed text in as few pieces as can be: each append is a call and a capacity check.
        // So the kind comes with the path's key, and a plain path's closing quote with the text
        // after it: a line is four appends.
        if let start = jsonStart(change.kind) {
            output.append(start)
        } else {
            output.append(#"{"kind":""#)
            appendName(of: change.kind, to: &output)
            output.append(#"","path":"#)
        }
        let plain = Escaping.isPlain(change.path.bytes, except: UInt8(ascii: "\""))
        if plain {
            output.append(UInt8(ascii: "\""))
            output.appendBytes(change.path.bytes)
        } else {
            var value: [UInt8] = []
            Escaping.jsonPathValue(key: "path", change.path, into: &value)
            output.appendBytes(value)
        }
        if change.oldPath == nil && !change.foundByRescan && !change.whileStopped && change.error == nil {
            if plain {
                output.append(change.isDirectory ? #"","isDirectory":true}\#n"# : #"","isDirectory":false}\#n"#)
            } else {
                output.append(change.isDirectory ? #","isDirectory":true}\#n"# : #","isDirectory":false}\#n"#)
            }
            return
        }
        if plain { output.append(UInt8(ascii: "\"")) }
        output.append(change.isDirectory ? #","isDirectory":true"# : #","isDirectory":false"#)
        if let oldPath = change.oldPath {
            output.append(UInt8(ascii: ","))
            var pair: [UInt8] = []
            Escaping.jsonPath(key: "oldPath", oldPath, into: &pair)
            output.appendBytes(pair)
        }
        if change.foundByRescan { output.append(#","foundByRescan":true"#) }
        if change.whileStopped { output.append(#","whileStopped":true"#) }
        if let error = change.error {
            output.append(#","error":"#)
            var reason: [UInt8] = []
            Escaping.jsonString(error.reason, into: &reason)
            output.appendBytes(reason)
        }
        output.append("}\n")
    }

    /// `{"kind":"NAME","path":` for each kind this version names.
    private static func jsonStart(_ kind: DirectoryChange.Kind) -> StaticString? {
        switch kind {
        case .created: return #"{"kind":"created","path":"#
        case .removed: return #"{"kind":"removed","path":"#
        case .modified: return #"{"kind":"modified","path":"#
        case .attributesChanged: return #"{"kind":"attributesChanged","path":"#
        case .renamed: return #"{"kind":"renamed","path":"#
        case .exchanged: return #"{"kind":"exchanged","path":"#
        case .movedIn: return #"{"kind":"movedIn","path":"#
        case .movedOut: return #"{"kind":"movedOut","path":"#
        case .rootRemoved: return #"{"kind":"rootRemoved","path":"#
        case .rootMoved: return #"{"kind":"rootMoved","path":"#
        case .overflow: return #"{"kind":"overflow","path":"#
        case .failed: return #"{"kind":"failed","path":"#
        case .opened: return #"{"kind":"opened","path":"#
        case .accessed: return #"{"kind":"accessed","path":"#
        case .writerClosed: return #"{"kind":"writerClosed","path":"#
        case .readerClosed: return #"{"kind":"readerClosed","path":"#
        @unknown default: return nil
        }
    }

    private static func isRoot(_ path: FileSystemPath) -> Bool {
        path.bytes.count == 1 && path.bytes[0] == UInt8(ascii: "/")
    }

    /// Writes the kind's name (its raw value); returns its length.
    @discardableResult
    private static func appendName<Sink: ByteSink>(of kind: DirectoryChange.Kind, to output: inout Sink) -> Int {
        let name: StaticString
        switch kind {
        case .created: name = "created"
        case .removed: name = "removed"
        case .modified: name = "modified"
        case .attributesChanged: name = "attributesChanged"
        case .renamed: name = "renamed"
        case .exchanged: name = "exchanged"
        case .movedIn: name = "movedIn"
        case .movedOut: name = "movedOut"
        case .rootRemoved: name = "rootRemoved"
        case .rootMoved: name = "rootMoved"
        case .overflow: name = "overflow"
        case .failed: name = "failed"
        case .opened: name = "opened"
        case .accessed: name = "accessed"
        case .writerClosed: name = "writerClosed"
        case .readerClosed: name = "readerClosed"
        @unknown default:
            output.appendBytes(Array(kind.rawValue.utf8))
            return kind.rawValue.utf8.count
        }
        output.append(name)
        return name.utf8CodeUnitCount
    }

    private static func colorCode(_ kind: DirectoryChange.Kind) -> StaticString {
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
