/// A table keyed by watch descriptor, with a hash of a few instructions. The watch table and the
/// router look one up for every event, and Swift's default hashing (seeded SipHash) of an `Int32`
/// costs many times that per lookup. Descriptors are small increasing numbers that nobody
/// outside can choose, so no keyed hash is needed; but not the identity either: the table probes
/// linearly, so sequential keys hashed to themselves would fill one long run of slots, and each
/// removal then shifts the rest of the run back (removing the 100,000 watches of a tree took
/// seconds). A multiply-xorshift mix spreads them.
///
/// Its own open addressing rather than `Dictionary`: a tree keeps three of these, one slot of
/// each per directory, and a dictionary grows at three quarters full, so at 100,000 directories
/// each had 262,144 slots; this one grows at four fifths (131,072 there), as ``NameTable`` does.
/// Keys and values are in two arrays; a removal shifts the run after it back, so there are no
/// tombstones and a lookup stops at the first empty slot.
struct ByDescriptor<Value> {
    /// The key of each slot, `empty` where no entry is. No descriptor is `Int32.min`: the kernel's are positive, the
    /// overflow event's is -1.
    private var slots: [Int32] = []
    private var values: [Value?] = []
    private(set) var count = 0

    private static var empty: Int32 { Int32.min }
    private static var smallest: Int { 8 }

    init() {}

    var isEmpty: Bool { count == 0 }

    /// The descriptors, in no particular order.
    var keys: [Int32] {
        var result: [Int32] = []
        result.reserveCapacity(count)
        for key in slots where key != Self.empty { result.append(key) }
        return result
    }

    subscript(wd: Int32) -> Value? {
        get {
            guard let slot = slot(of: wd) else { return nil }
            return values[slot]
        }
        _modify {
            // The value is moved out of its slot while it is changed, so that a change to what it
            // holds (an array's append) finds it uniquely referenced and copies nothing.
            let found = slot(of: wd)
            var value: Value? = nil
            if let found { swap(&value, &values[found]) }
            defer {
                switch (found, value) {
                case (let found?, let value?): values[found] = value
                case (let found?, nil): remove(at: found)
                case (nil, let value?): insert(wd, value)
                case (nil, nil): break
                }
            }
            yield &value
        }
    }

    @discardableResult
    mutating func removeValue(forKey wd: Int32) -> Value? {
        guard let slot = slot(of: wd) else { return nil }
        let value = values[slot]
        remove(at: slot)
        return value
    }

    // MARK: - Open addressing

    private func slot(of wd: Int32) -> Int? {
        guard !slots.isEmpty, wd != Self.empty else { return nil }
        let mask = slots.count - 1
        var slot = Self.home(of: wd, mask: mask)
        while true {
            let key = slots[slot]
            if key == wd { return slot }
            if key == Self.empty { return nil }
            slot = (slot + 1) & mask
        }
    }

    /// Adds `wd`, which is not in the table.
    private mutating func insert(_ wd: Int32, _ value: Value) {
        precondition(wd != Self.empty, "Int32.min is not a descriptor")
        if (count + 1) * 5 > slots.count * 4 { grow() }
        let mask = slots.count - 1
        var slot = Self.home(of: wd, mask: mask)
        while slots[slot] != Self.empty { slot = (slot + 1) & mask }
        slots[slot] = wd
        values[slot] = value
        count += 1
    }

    /// Empties `removed` and shifts back each entry after it in its run that may move there
    /// (one whose home is not between the hole and itself), so that every entry stays reachable
    /// from its home without crossing an empty slot.
    private mutating func remove(at removed: Int) {
        let mask = slots.count - 1
        var hole = removed
        var slot = (removed + 1) & mask
        while slots[slot] != Self.empty {
            let home = Self.home(of: slots[slot], mask: mask)
            // The entry at `slot` stays when its home lies cyclically in (hole, slot].
            let stays = hole <= slot ? (hole < home && home <= slot) : (hole < home || home <= slot)
            if !stays {
                slots[hole] = slots[slot]
                values[hole] = values[slot]
                hole = slot
            }
            slot = (slot + 1) & mask
        }
        slots[hole] = Self.empty
        values[hole] = nil
        count -= 1
    }

    private mutating func grow() {
        let oldSlots = slots
        var oldValues: [Value?] = []
        swap(&oldValues, &values)
        let size = Swift.max(Self.smallest, oldSlots.count * 2)
        slots = Array(repeating: Self.empty, count: size)
        values = Array(repeating: nil, count: size)
        count = 0
        for (index, key) in oldSlots.enumerated() where key != Self.empty {
            guard let value = oldValues[index] else { preconditionFailure("a descriptor without a value") }
            insert(key, value)
        }
    }

    /// MurmurHash3's finalizer: the low bits, the ones a slot uses, depend on every bit of the key.
    private static func home(of wd: Int32, mask: Int) -> Int {
        var x = UInt64(UInt32(bitPattern: wd))
        x ^= x >> 33
        x &*= 0xFF51_AFD7_ED55_8CCD
        x ^= x >> 33
        x &*= 0xC4CE_B9FE_1A85_EC53
        x ^= x >> 33
        return Int(truncatingIfNeeded: x) & mask
    }
}
