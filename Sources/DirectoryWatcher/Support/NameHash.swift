/// A hash of a short run of bytes: an entry name (a kept directory's table, ``NameTable``, keeps
/// half of it beside each name), a file handle (``KernelHandle``, which gives it to `Hasher`
/// instead of its bytes). Eight bytes at a time, each word and the state, both keyed with the
/// secret, folded with one 64×64→128-bit multiply (the step of wyhash and foldhash).
///
/// The secret is drawn at random once per process, so someone who can name files in a watched
/// directory cannot choose names that all land in one bucket from outside; this is the defence
/// those hashes offer, not SipHash's.
enum NameHash {
    static let secret: (UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        // Odd, so multiplying by them loses no bits.
        return (generator.next() | 1, generator.next() | 1)
    }()

    /// The high and low halves of the full product, exclusive-or'ed.
    @inline(__always)
    static func fold(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let product = a.multipliedFullWidth(by: b)
        return product.high ^ product.low
    }

    static func of(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.withUnsafeBytes { of($0) }
    }

    static func of(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let (k0, k1) = secret
        var state = k0 ^ UInt64(bytes.count)
        var offset = 0
        while offset + 8 <= bytes.count {
            let word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            state = fold(word ^ k0, state ^ k1)
            offset += 8
        }
        // The last one to seven bytes, little end first; the length above tells "a" from "a\0".
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count {
            tail |= UInt64(bytes[offset]) << shift
            shift += 8
            offset += 1
        }
        return fold(tail ^ k0, state ^ k1)
    }
}
