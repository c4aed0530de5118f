import Glibc

/// A file handle (`name_to_handle_at`), as a backend that marks whole file systems names a
/// directory: the file system's id, the handle's type and its bytes, kept end to end as one key
/// (the router's table from handle to directory hashes it when a record's handle is not the
/// last one it resolved).
struct KernelHandle: Hashable, Sendable {
    /// The 8 bytes of the file system's id, the handle's type (4 bytes, little-endian), the handle.
    let key: [UInt8]

    init(key: [UInt8]) { self.key = key }

    /// The key's bytes in one call: the default hashes an array element by element, twenty
    /// calls for a key of twenty bytes, once per event routed.
    func hash(into hasher: inout Hasher) {
        key.withUnsafeBytes { hasher.combine(bytes: $0) }
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
    init(fileSystemID: UnsafeRawBufferPointer, type: Int32, bytes: UnsafeRawBufferPointer) {
        key = [UInt8](unsafeUninitializedCapacity: 12 + bytes.count) { buffer, count in
            let base = UnsafeMutableRawBufferPointer(buffer)
            base.copyMemory(from: fileSystemID)
            withUnsafeBytes(of: type.littleEndian) {
                base.baseAddress!.advanced(by: 8).copyMemory(from: $0.baseAddress!, byteCount: 4)
            }
            if !bytes.isEmpty {
                base.baseAddress!.advanced(by: 12).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            }
            count = 12 + bytes.count
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
