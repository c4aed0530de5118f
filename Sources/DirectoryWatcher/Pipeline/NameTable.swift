import CDirectoryWatcherShims
import Glibc

/// A table from entry names to values, built for a kept directory (``KnownDirectory``), which
/// inserts or looks up a name for every event.
///
/// Why not `[[UInt8]: Value]`: that costs a heap array per name (an allocation at each create, a
/// release at each remove and at teardown), SipHash over the name at every lookup, and, when the
/// table grows, every name's storage read again to rehash it beside a move of every value. Here:
///
/// - the names live end to end in one byte array (the arena), so a name stored costs no
///   allocation of its own; the bytes of removed names are reclaimed by compacting the arena once
///   they are more than half of it;
/// - the values live in one array of records, in insertion order, with the name's place in the
///   arena, and a removal moves the last record into the hole; a record keeps no hash (8 bytes
///   of each entry's): the index's slot keeps half of it, which rejects another name and places
///   the slot when the index grows; a record moved by a removal has its name hashed again;
/// - the index is open addressing with linear probing over 8-byte slots, each the record's number
///   and the upper half of its hash: a probe rejects another name without reading the records,
///   and growing the index rehashes nothing and moves no value.
///
/// Lookups take the name as a slice of the read's buffer: nothing is copied to look up.
struct NameTable<Value> {
    /// The value first, then the name's length and place: a kept entry's value is 59 bytes
    /// (``KnownDirectory/Known``), and the two fit in what is left of its 64-byte stride, where
    /// placed first they took 72. A name is at most 255 bytes (`NAME_MAX`); a longer one (none
    /// the kernel gives) has `length` 255 and its length in the four bytes before it.
    fileprivate struct Record {
        var value: Value
        var length: UInt8
        var start: UInt32
    }

    private static var longLength: UInt8 { 255 }

    /// The bytes each entry's record takes (for tests: a kept entry's memory).
    static var recordStride: Int { MemoryLayout<Record>.stride }

    private var records: [Record] = []
    private var names: [UInt8] = []
    /// Bytes of `names` that no record uses any more.
    private var garbage = 0
    /// 0: empty; else `(upper half of the hash) << 32 | (record number + 1)`. A power of two long,
    /// at most four fifths full (``fits(_:in:)``); none until the first name, so an empty table
    /// (most directories of a tree of directories) allocates nothing.
    private var slots: [UInt64] = []

    init() {}

    /// A table sized for `minimumCapacity` names of `nameBytes` bytes in all (a listing's): the
    /// arena is not grown by doubling, which would leave up to half of it unused.
    init(minimumCapacity: Int, nameBytes: Int = 0) {
        reserveCapacity(minimumCapacity)
        names.reserveCapacity(nameBytes)
    }

    var count: Int { records.count }
    var isEmpty: Bool { records.isEmpty }

    mutating func reserveCapacity(_ capacity: Int) {
        guard capacity > 0 else { return }
        records.reserveCapacity(capacity)
        var size = max(slots.count, Self.smallestIndex)
        while !Self.fits(capacity, in: size) { size *= 2 }
        if size > slots.count { rebuildIndex(size: size) }
    }

    // MARK: - Looking up

    subscript(name: ArraySlice<UInt8>) -> Value? {
        get {
            let hash = NameHash.of(name)
            return find(name, hash: hash).record.map { records[$0].value }
        }
        set {
            if let newValue { updateValue(newValue, forName: name) } else { removeValue(forName: name) }
        }
    }

    /// The number of the record for `name`, valid until the next insertion or removal; see
    /// ``subscript(record:)``.
    func record(forName name: ArraySlice<UInt8>) -> Int? {
        find(name, hash: NameHash.of(name)).record
    }

    /// ``record(forName:)``, trying record `expected` first: a listing read in the order of the
    /// table's records (a table built from the last listing, or a saved state of it) finds each
    /// name there with one comparison and no hash.
    func record(forName name: ArraySlice<UInt8>, expecting expected: Int) -> Int? {
        if expected >= 0 && expected < records.count && hasName(expected, name) { return expected }
        return record(forName: name)
    }

    /// Asks the processor for the index slot where a lookup of `name` starts: a table of many
    /// thousand names is larger than the caches, and each event's first probe would otherwise
    /// wait for memory, one event after another.
    /// A small index stays in the caches: it is not worth the hash.
    func prefetch(_ name: ArraySlice<UInt8>) {
        guard slots.count >= Self.prefetchedIndex else { return }
        let slot = home(of: NameHash.of(name))
        slots.withUnsafeBufferPointer { cdw_prefetch($0.baseAddress! + slot) }
    }

    /// The value of a record found with ``record(forName:)``.
    subscript(record number: Int) -> Value {
        get { records[number].value }
        _modify { yield &records[number].value }
    }

    /// Changes the value of `name` in place, when the name is there: one lookup, and no copy of
    /// the value out and back (a listing of thousands of names updates each of them).
    mutating func modifyValue(forName name: ArraySlice<UInt8>, _ body: (inout Value) -> Void) {
        guard let number = find(name, hash: NameHash.of(name)).record else { return }
        body(&records[number].value)
    }

    /// Sets the value for `name`, returning the value it replaced, if any.
    @discardableResult
    mutating func updateValue(_ value: Value, forName name: ArraySlice<UInt8>) -> Value? {
        let hash = NameHash.of(name)
        let found = find(name, hash: hash)
        if let number = found.record {
            let old = records[number].value
            records[number].value = value
            return old
        }
        guard Self.fits(records.count + 1, in: slots.count) else {
            rebuildIndex(size: max(slots.count * 2, Self.smallestIndex))
            return updateValue(value, forName: name)
        }
        let start = names.count
        let length: UInt8
        if name.count < Int(Self.longLength) {
            length = UInt8(name.count)
        } else {
            length = Self.longLength
            withUnsafeBytes(of: UInt32(name.count).littleEndian) { names.append(contentsOf: $0) }
        }
        names.append(contentsOf: name)
        precondition(names.count <= UInt32.max, "NameTable: more than 4 GiB of names")
        records.append(Record(value: value, length: length, start: UInt32(start)))
        slots[found.slot] = Self.slot(hash: hash, record: records.count - 1)
        return nil
    }

    /// Removes `name`, returning its value, if it was there.
    @discardableResult
    mutating func removeValue(forName name: ArraySlice<UInt8>) -> Value? {
        let found = find(name, hash: NameHash.of(name))
        guard let number = found.record else { return nil }
        removeSlot(at: found.slot)
        let removed = records[number]
        let last = records.count - 1
        if number != last {
            // The last record moves into the hole: its slot is rewritten to its new number.
            let moved = records[last]
            let movedHash = hash(of: moved)
            var slot = home(of: movedHash)
            while Int(truncatingIfNeeded: slots[slot] & 0xFFFF_FFFF) != last + 1 { slot = (slot + 1) & mask }
            slots[slot] = Self.slot(hash: movedHash, record: number)
            records[number] = moved
        }
        records.removeLast()
        garbage += stored(removed).count
        if garbage > 4096 && garbage * 2 > names.count { compactNames() }
        return removed.value
    }

    mutating func removeAll() {
        records.removeAll()
        names.removeAll()
        garbage = 0
        slots = []
    }

    // MARK: - Visiting

    /// How many values satisfy `predicate`, counted no further than `limit + 1`: whether there
    /// are more than `limit`, with no name read.
    func count(where predicate: (Value) -> Bool, upTo limit: Int) -> Int {
        var found = 0
        for record in records where predicate(record.value) {
            found += 1
            if found > limit { break }
        }
        return found
    }

    /// Calls `body` with each name and its value, in no particular order.
    func forEach(_ body: (ArraySlice<UInt8>, Value) throws -> Void) rethrows {
        for record in records {
            try body(names[name(of: record)], record.value)
        }
    }

    /// The table as a dictionary with names of their own (for a rescan's diff, which is rare).
    func dictionary() -> [[UInt8]: Value] {
        var result: [[UInt8]: Value] = [:]
        result.reserveCapacity(records.count)
        forEach { name, value in result[Array(name)] = value }
        return result
    }

    // MARK: - The index

    private var mask: Int { slots.count - 1 }
    private static var smallestIndex: Int { 8 }
    /// The least index ``prefetch(_:)`` asks for: 64 KiB, more than a core's first-level cache.
    static var prefetchedIndex: Int { 8192 }

    /// Whether `count` records fit in an index of `size` slots: at most four fifths full. A slot
    /// is 8 bytes, so an index kept half full would cost 16 to 32 bytes per entry; at four fifths
    /// it costs 10 to 20, and a probe that passes another name's slot compares half a hash, not
    /// a name, so the longer runs cost a few loads each.
    private static func fits(_ count: Int, in size: Int) -> Bool { count * 5 <= size * 4 }

    private func home(of hash: UInt64) -> Int {
        Int(truncatingIfNeeded: hash >> 32) & mask
    }

    private static func slot(hash: UInt64, record: Int) -> UInt64 {
        (hash & 0xFFFF_FFFF_0000_0000) | UInt64(record + 1)
    }

    /// Where `name` is: its slot and record, or the empty slot where it would go.
    private func find(_ name: ArraySlice<UInt8>, hash: UInt64) -> (slot: Int, record: Int?) {
        if slots.isEmpty { return (0, nil) }
        let upper = hash & 0xFFFF_FFFF_0000_0000
        var slot = home(of: hash)
        while true {
            let content = slots[slot]
            if content == 0 { return (slot, nil) }
            if content & 0xFFFF_FFFF_0000_0000 == upper {
                let number = Int(truncatingIfNeeded: content & 0xFFFF_FFFF) - 1
                if hasName(number, name) { return (slot, number) }
            }
            slot = (slot + 1) & mask
        }
    }

    private func hasName(_ number: Int, _ name: ArraySlice<UInt8>) -> Bool {
        let record = records[number]
        let start: Int
        if record.length != Self.longLength {
            guard Int(record.length) == name.count else { return false }
            start = Int(record.start)
        } else {
            let range = self.name(of: record)
            guard range.count == name.count else { return false }
            start = range.lowerBound
        }
        guard !name.isEmpty else { return true }
        return names.withUnsafeBufferPointer { names in
            name.withUnsafeBufferPointer { name in
                memcmp(names.baseAddress! + start, name.baseAddress!, name.count) == 0
            }
        }
    }

    /// Empties a slot without leaving a tombstone: each later slot of the same run that may sit
    /// in the hole (its home is not between the hole and itself) moves back into it.
    private mutating func removeSlot(at removed: Int) {
        var hole = removed
        var next = (hole + 1) & mask
        while slots[next] != 0 {
            let home = Int(truncatingIfNeeded: slots[next] >> 32) & mask
            if (next - home) & mask >= (next - hole) & mask {
                slots[hole] = slots[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        slots[hole] = 0
    }

    /// A slot holds the half of the hash that places it, so the index grows from the old slots
    /// alone: no name is read or hashed again.
    private mutating func rebuildIndex(size: Int) {
        var fresh = [UInt64](repeating: 0, count: size)
        let mask = size - 1
        for content in slots where content != 0 {
            var slot = Int(truncatingIfNeeded: content >> 32) & mask
            while fresh[slot] != 0 { slot = (slot + 1) & mask }
            fresh[slot] = content
        }
        slots = fresh
    }

    private func hash(of record: Record) -> UInt64 {
        NameHash.of(names[name(of: record)])
    }

    /// Where the record's name is in the arena.
    private func name(of record: Record) -> Range<Int> {
        let start = Int(record.start)
        guard record.length == Self.longLength else { return start..<start + Int(record.length) }
        let length = names.withUnsafeBytes {
            Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: start, as: UInt32.self)))
        }
        return start + 4..<start + 4 + length
    }

    /// What the record takes in the arena: its name, and a long name's length before it.
    private func stored(_ record: Record) -> Range<Int> {
        let range = name(of: record)
        return Int(record.start)..<range.upperBound
    }

    private mutating func compactNames() {
        var compacted: [UInt8] = []
        compacted.reserveCapacity(names.count - garbage)
        for number in records.indices {
            let range = stored(records[number])
            records[number].start = UInt32(compacted.count)
            compacted.append(contentsOf: names[range])
        }
        names = compacted
        garbage = 0
    }
}

/// A table is plain data (arrays of values): it may cross threads whenever its values may.
extension NameTable: Sendable where Value: Sendable {}
extension NameTable.Record: Sendable where Value: Sendable {}
