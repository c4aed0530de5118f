/// A dictionary keyed by watch descriptor, hashed to itself. The watch table and the router look
/// one up for every event, and Swift's default hashing (seeded SipHash) of an `Int32` costs about
/// 90 instructions per lookup. Identity suits these keys: the kernel hands descriptors out as
/// small increasing numbers, which spread over the buckets without collisions, and nobody
/// outside can choose them to make them collide.
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
        /// standard library's customization point for a cheaper hash); the seed only varies
        /// iteration order between dictionaries, which nothing here relies on.
        func _rawHashValue(seed: Int) -> Int { Int(wd) }
    }
}
