import Glibc

/// Where the output formats write a line's bytes: a byte array, or dirwatch's ``LineBuffer``.
public protocol ByteSink {
    mutating func append(_ byte: UInt8)
    /// A literal's bytes.
    mutating func append(_ literal: StaticString)
    mutating func appendBytes(_ bytes: [UInt8])
    mutating func appendBytes(_ bytes: ArraySlice<UInt8>)
}

extension [UInt8]: ByteSink {
    /// Appends a literal's bytes with one copy.
    @inline(__always)
    public mutating func append(_ literal: StaticString) {
        literal.withUTF8Buffer { append(contentsOf: $0) }
    }

    @inline(__always)
    public mutating func appendBytes(_ bytes: [UInt8]) { append(contentsOf: bytes) }

    @inline(__always)
    public mutating func appendBytes(_ bytes: ArraySlice<UInt8>) { append(contentsOf: bytes) }
}

/// The lines of dirwatch's batches, formatted into storage kept from batch to batch. The storage
/// is zero-filled past ``count``, so a piece of a line is one `memcpy` into it: an array's
/// `append(contentsOf:)` checks its uniqueness and capacity and goes through the standard
/// library's general copy, and a JSON line is four pieces (callgrind: about 200 instructions a
/// line for the appends, Docs/benchmarks.md).
struct LineBuffer: ByteSink {
    /// Bytes `0..<count` are the lines; the rest is zero, room for the next.
    private var storage: [UInt8] = []
    private(set) var count = 0

    /// The storage's size: what the buffer holds on to between batches.
    var capacity: Int { storage.count }

    /// Empties the buffer, keeping its storage.
    mutating func removeAll() { count = 0 }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        if count == storage.count { grow(1) }
        storage[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func append(_ literal: StaticString) {
        literal.withUTF8Buffer { copy(UnsafeRawBufferPointer($0)) }
    }

    @inline(__always)
    mutating func appendBytes(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { copy($0) }
    }

    @inline(__always)
    mutating func appendBytes(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { copy($0) }
    }

    @inline(__always)
    private mutating func copy(_ source: UnsafeRawBufferPointer) {
        let length = source.count
        guard length > 0 else { return }
        if storage.count - count < length { grow(length) }
        let at = count
        storage.withUnsafeMutableBytes { _ = memcpy($0.baseAddress! + at, source.baseAddress!, length) }
        count += length
    }

    /// At least `length` more bytes of room, doubling the storage as an array's append would.
    private mutating func grow(_ length: Int) {
        storage.append(contentsOf: repeatElement(0, count: Swift.max(length, storage.count, 4096)))
    }

    /// Writes bytes `start..<count` to `fd` (``writeAll(_:_:from:)``).
    func write(to fd: Int32, from start: Int) -> Bool {
        storage.withUnsafeBytes { writeAll(fd, UnsafeRawBufferPointer(rebasing: $0[start..<count])) }
    }
}
