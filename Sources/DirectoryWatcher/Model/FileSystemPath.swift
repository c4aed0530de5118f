/// A path as Linux stores it: bytes, not text.
///
/// Linux file names are any bytes but `/` and NUL. Most are UTF-8, and for those ``string`` is the
/// path as text. A name that is not valid UTF-8 is kept byte for byte, so it can always be opened
/// again (``withCString(_:)``) even though it has no exact `String` form; ``description`` shows
/// such bytes as `\xNN` for display only.
///
/// ```swift
/// if let text = change.path.string {
///     print("changed:", text)
/// }
/// let fd = change.path.withCString { open($0, O_RDONLY) }  // works for any name
/// ```
public struct FileSystemPath: Hashable, Comparable, Sendable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    /// The path's bytes, without a terminating NUL.
    public let bytes: [UInt8]

    /// A path from raw bytes. Bytes after a NUL, which no path can contain, are dropped.
    public init<Bytes: Sequence>(bytes: Bytes) where Bytes.Element == UInt8 {
        self.bytes = Array(bytes.prefix { $0 != 0 })
    }

    /// A path from text, stored as its UTF-8 bytes.
    public init(_ string: String) {
        self.init(bytes: string.utf8)
    }

    public init(stringLiteral value: String) {
        self.init(value)
    }

    /// The path as text, or nil when its bytes are not valid UTF-8.
    public var string: String? {
        String(validating: bytes, as: UTF8.self)
    }

    /// The path for display: valid UTF-8 as is, any other byte as `\xNN`. Not reversible; use
    /// ``bytes`` or ``withCString(_:)`` to reach the file.
    public var description: String {
        if let string { return string }
        var result = ""
        var index = 0
        while index < bytes.count {
            // Longest valid UTF-8 sequence starting here (1 to 4 bytes), else one escaped byte.
            var decoded = false
            for length in 1...min(4, bytes.count - index) {
                if let piece = String(validating: bytes[index..<index + length], as: UTF8.self) {
                    result += piece
                    index += length
                    decoded = true
                    break
                }
            }
            if !decoded {
                let byte = bytes[index]
                let hex = String(byte, radix: 16, uppercase: true)
                result += "\\x" + (byte < 16 ? "0" + hex : hex)
                index += 1
            }
        }
        return result
    }

    /// Whether the path starts at the root directory.
    public var isAbsolute: Bool { bytes.first == UInt8(ascii: "/") }

    /// The last component: the file's name within its directory.
    public var lastComponent: FileSystemPath {
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return self }
        return FileSystemPath(bytes: bytes[(slash + 1)...])
    }

    /// The directory that holds this path, as dirname(1) has it: everything before the last
    /// slash (`/srv` for `/srv/a.txt`, `.` for `./a.txt`); `/` for a top-level entry and for `/`
    /// itself; `.`, the current directory, for a relative path with no slash (a bare name such as
    /// `a.txt`, or the empty path). Lexical: the path is not resolved, and a trailing slash is not
    /// dropped first (dirname(1) drops it; the watcher's own paths have none).
    public var parent: FileSystemPath {
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else {
            return FileSystemPath(bytes: [UInt8(ascii: ".")])
        }
        return FileSystemPath(bytes: slash == 0 ? bytes[...0] : bytes[..<slash])
    }

    /// This path with `name` appended as a new component.
    public func appending(_ name: FileSystemPath) -> FileSystemPath {
        appending(bytes: name.bytes)
    }

    /// This path with the entry `name` (no slash, no NUL) appended. Every change the watcher
    /// reports builds its path here, so the result is allocated once, at its final size.
    func appending(bytes name: ArraySlice<UInt8>) -> FileSystemPath {
        joined(with: name)
    }

    /// ``appending(bytes:)-(ArraySlice<UInt8>)``, for a name kept elsewhere than in an array (a
    /// tree directory's, in its node).
    func appending<Name: Collection<UInt8>>(bytes name: Name) -> FileSystemPath {
        joined(with: name)
    }

    @inline(__always)
    private func joined<Name: Collection<UInt8>>(with name: Name) -> FileSystemPath {
        if name.isEmpty { return self }
        let needsSeparator = bytes.last != UInt8(ascii: "/")
        let count = bytes.count + (needsSeparator ? 1 : 0) + name.count
        // Joined in scratch space (the stack, for any ordinary path), then copied into an array
        // of exactly that size in one allocation. Building the array in place costs more in
        // Swift 6.3: `Array(unsafeUninitializedCapacity:)` allocates through an unspecialized
        // runtime call that looks the type up every time, and `reserveCapacity` plus three
        // appends cost more than this too (callgrind, Docs/benchmarks.md).
        let joined = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { buffer in
            var end = buffer.initialize(fromContentsOf: bytes)
            if needsSeparator {
                buffer.initializeElement(at: end, to: UInt8(ascii: "/"))
                end += 1
            }
            end = buffer[end...].initialize(fromContentsOf: name)
            assert(end == buffer.count)
            return [UInt8](buffer)
        }
        return FileSystemPath(trustedBytes: joined)
    }

    func appending(bytes name: [UInt8]) -> FileSystemPath {
        appending(bytes: name[...])
    }

    /// Calls `body` with the path as a NUL-terminated C string, for `open`, `stat` and the like.
    public func withCString<Result, Failure: Error>(
        _ body: (UnsafePointer<CChar>) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var terminated = bytes
        terminated.append(0)
        return try terminated.withUnsafeBufferPointer { buffer throws(Failure) in
            try buffer.withMemoryRebound(to: CChar.self) { chars throws(Failure) in
                try body(chars.baseAddress!)
            }
        }
    }

    /// Byte order, like `ls` in the C locale.
    public static func < (lhs: FileSystemPath, rhs: FileSystemPath) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }

    private init(trustedBytes: [UInt8]) {
        self.bytes = trustedBytes
    }
}

extension FileSystemPath {
    /// `path` made absolute against `currentDirectory`, lexically: empty and `.` components and
    /// repeated or trailing slashes go; `..` stays, since only the file system knows what it
    /// means across a symbolic link.
    static func absolute(_ path: FileSystemPath, currentDirectory: FileSystemPath) -> FileSystemPath {
        let joined = path.isAbsolute ? path.bytes : currentDirectory.bytes + [UInt8(ascii: "/")] + path.bytes
        var result: [UInt8] = []
        result.reserveCapacity(joined.count)
        for component in joined.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true) {
            if component.elementsEqual([UInt8(ascii: ".")]) { continue }
            result.append(UInt8(ascii: "/"))
            result.append(contentsOf: component)
        }
        return FileSystemPath(bytes: result.isEmpty ? [UInt8(ascii: "/")] : result)
    }
}
