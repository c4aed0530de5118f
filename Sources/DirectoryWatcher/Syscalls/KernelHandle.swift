import Glibc

/// A file handle (`name_to_handle_at`), as a backend that marks whole file systems names a
/// directory: the file system's id, the handle's type and its bytes, kept end to end as one key
/// (the router's table from handle to directory hashes it when a record's handle is not the
/// last one it resolved).
struct KernelHandle: Hashable, Sendable {
    /// The 8 bytes of the file system's id, the handle's type (4 bytes, little-endian), the handle.
    let key: [UInt8]

    init(key: [UInt8]) { self.key = key }

    /// The key's bytes hashed by ``NameHash`` into one word for `Hasher`: the default hashes an
    /// array element by element, twenty calls for a key of twenty bytes, and `Hasher`'s own
    /// `combine(bytes:)` costs about twice a lookup's other work; a record's handle is hashed when
    /// it is not one of the last two the router resolved (``MarkedTrees``).
    func hash(into hasher: inout Hasher) {
        hasher.combine(key.withUnsafeBytes { NameHash.of($0) })
    }

    /// Compared with one `memcmp`: `Array`'s own `==` goes element by element, and the router
    /// compares a record's handle with the last one it saw at every record.
    static func == (lhs: KernelHandle, rhs: KernelHandle) -> Bool {
        lhs.key.withUnsafeBytes { left in
            rhs.key.withUnsafeBytes { right in
                left.count == right.count
                    && (left.isEmpty || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0)
            }
        }
    }

    /// Whether this is the handle of these raw parts (compared in place, nothing made).
    func matches(fileSystemID: UnsafeRawBufferPointer, type: Int32, bytes: UnsafeRawBufferPointer) -> Bool {
        guard key.count == 12 + bytes.count else { return false }
        return key.withUnsafeBytes { key in
            memcmp(key.baseAddress!, fileSystemID.baseAddress!, 8) == 0
                && key.loadUnaligned(fromByteOffset: 8, as: Int32.self) == type.littleEndian
                && (bytes.isEmpty || memcmp(key.baseAddress! + 12, bytes.baseAddress!, bytes.count) == 0)
        }
    }

    /// A handle read from a record: the file system's id, then `struct file_handle`'s type and
    /// bytes, copied into the key at once.
    /// (Joined in scratch space, then copied into the array: `Array(unsafeUninitializedCapacity:)`
    /// allocates through an unspecialized call that looks the element type's metadata up each
    /// time, several hundred instructions, once for every handle a record makes.)
    init(fileSystemID: UnsafeRawBufferPointer, type: Int32, bytes: UnsafeRawBufferPointer) {
        key = withUnsafeTemporaryAllocation(byteCount: 12 + bytes.count, alignment: 1) { base in
            base.copyMemory(from: fileSystemID)
            withUnsafeBytes(of: type.littleEndian) {
                base.baseAddress!.advanced(by: 8).copyMemory(from: $0.baseAddress!, byteCount: 4)
            }
            if !bytes.isEmpty {
                base.baseAddress!.advanced(by: 12).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            }
            return [UInt8](UnsafeRawBufferPointer(base))
        }
    }

    init(fileSystemID: some Collection<UInt8>, type: Int32, bytes: some Collection<UInt8>) {
        var key: [UInt8] = []
        key.reserveCapacity(12 + bytes.count)
        key += fileSystemID
        withUnsafeBytes(of: type.littleEndian) { key += $0 }
        key += bytes
        self.key = key
    }

    var fileSystemID: ArraySlice<UInt8> { key[0..<8] }
    var type: Int32 {
        var value: UInt32 = 0
        for byte in key[8..<12].reversed() { value = value << 8 | UInt32(byte) }
        return Int32(bitPattern: value)
    }
    var bytes: ArraySlice<UInt8> { key[12...] }
}
