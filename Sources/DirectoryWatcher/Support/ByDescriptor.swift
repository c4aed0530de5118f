/// A dictionary keyed by watch descriptor, with a hash of a few instructions. The watch table and
/// the router look one up for every event, and Swift's default hashing (seeded SipHash) of an
/// `Int32` costs many times that per lookup. Descriptors are small increasing numbers that
/// nobody outside can choose, so no keyed hash is needed; but not the identity either: a
/// dictionary probes linearly, so sequential keys hashed to themselves fill one long run of
/// buckets, and each removal then shifts the rest of the run back (removing the 100,000
/// watches of a tree took seconds). A multiply-xorshift mix spreads them.
struct ByDescriptor<Value> {
    private var storage: [Key: Value] = [:]

    init() {}

    subscript(wd: Int32) -> Value? {
        get { storage[Key(wd)] }
        _modify { yield &storage[Key(wd)] }
    }

    @discardableResult
    mutating func removeValue(forKey wd: Int32) -> Value? {
        storage.removeValue(forKey: Key(wd))
    }

    var isEmpty: Bool { storage.isEmpty }
    var count: Int { storage.count }
    var keys: [Int32] { storage.keys.map(\.wd) }

    private struct Key: Hashable {
        let wd: Int32

        init(_ wd: Int32) { self.wd = wd }

        func hash(into hasher: inout Hasher) { hasher.combine(wd) }

        /// What `Dictionary` calls instead of ``hash(into:)`` when a type provides it (the
        /// standard library's customization point for a cheaper hash): MurmurHash3's finalizer,
        /// whose low bits, the ones a dictionary's buckets use, depend on every bit of the key.
        func _rawHashValue(seed: Int) -> Int {
            var x = UInt64(UInt32(bitPattern: wd)) &+ UInt64(UInt(bitPattern: seed))
            x ^= x >> 33
            x &*= 0xFF51_AFD7_ED55_8CCD
            x ^= x >> 33
            x &*= 0xC4CE_B9FE_1A85_EC53
            x ^= x >> 33
            return Int(truncatingIfNeeded: x)
        }
    }
}
