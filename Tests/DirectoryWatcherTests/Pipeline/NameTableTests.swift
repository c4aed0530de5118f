import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The table a kept directory keeps its entries in, checked against a `Dictionary` doing the same
/// operations: its index, its removals without tombstones and its arena of names are its own
/// code, so they are tried where they break (runs of neighbouring slots, the last record moved
/// into a hole, the arena compacted, the index grown).
class NameTableTests: XCTestCase {
    /// Two seeds and 10,000 names here; five seeds and 100,000 names in the stress suite.
    var scale: Scale { .fast }

    private func bytes(_ name: String) -> ArraySlice<UInt8> { Array(name.utf8)[...] }

    /// Checks every name the model holds, and the whole content both ways.
    private func assertSame(
        _ table: NameTable<Int>, _ model: [[UInt8]: Int], file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(table.count, model.count, "count", file: file, line: line)
        for (name, value) in model {
            XCTAssertEqual(table[name[...]], value, "\(name)", file: file, line: line)
        }
        XCTAssertEqual(table.dictionary(), model, file: file, line: line)
    }

    func testRandomOperationsMatchADictionary() {
        for seed: UInt64 in scale == .stress ? [1, 2, 3, 42, 2026] : [1, 2026] {
            var random = SplitMix64(seed: seed)
            var table = NameTable<Int>()
            var model: [[UInt8]: Int] = [:]
            // Few enough names that they come back after their removal, many enough for the
            // table to grow, compact and wrap around its index.
            let names = (0..<3000).map { index -> [UInt8] in
                // One in fifty about the longest a record's length byte holds, and beyond it.
                let length =
                    index % 50 == 0 ? Int.random(in: 250...300, using: &random) : Int.random(in: 1...40, using: &random)
                return (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) } + Array("\(index)".utf8)
            }
            for step in 0..<40_000 {
                let name = names[Int.random(in: 0..<names.count, using: &random)]
                // Looked up through a slice that does not start at index 0, as a read's buffer is.
                let buffer = [0xFF, 0x00] + name + [0x2F]
                let slice = buffer[2..<(2 + name.count)]
                // Asked ahead as the loop asks it: on an empty table, a growing one, any name.
                table.prefetch(slice)
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<5:
                    XCTAssertEqual(table.updateValue(step, forName: slice), model.updateValue(step, forKey: name))
                case 5..<8:
                    XCTAssertEqual(table.removeValue(forName: slice), model.removeValue(forKey: name))
                case 8:
                    if let record = table.record(forName: slice) {
                        table[record: record] += 1
                        model[name]! += 1
                    } else {
                        XCTAssertNil(model[name])
                    }
                default:
                    XCTAssertEqual(table[slice], model[name])
                }
                if step % 5000 == 0 { assertSame(table, model) }
            }
            assertSame(table, model)
        }
    }

    /// A record keeps a name's length in a byte: names of 255 bytes and more (none the kernel
    /// gives, whose names are at most 255) keep theirs in the arena, and are found, visited,
    /// removed and compacted like the others.
    func testNamesOfTheLongestLengthAByteHoldsAndLonger() {
        var table = NameTable<Int>()
        var model: [[UInt8]: Int] = [:]
        let lengths = [0, 1, 15, 254, 255, 256, 1000, 70_000]
        for (index, length) in lengths.enumerated() {
            let name = [UInt8](repeating: UInt8(ascii: "a") + UInt8(index), count: length)
            XCTAssertNil(table.updateValue(index, forName: name[...]))
            model[name] = index
            // The same length and one byte different: another name.
            var other = name + [UInt8(ascii: "z")]
            other.removeFirst()
            if !other.isEmpty, other != name {
                XCTAssertNil(table[other[...]], "\(length)")
            }
        }
        assertSame(table, model)
        // Removing names until the arena compacts (its dead bytes over 4 KiB and half of it).
        for length in [70_000, 255, 1] {
            let index = lengths.firstIndex(of: length)!
            let name = [UInt8](repeating: UInt8(ascii: "a") + UInt8(index), count: length)
            XCTAssertEqual(table.removeValue(forName: name[...]), index)
            model[name] = nil
            assertSame(table, model)
        }
        XCTAssertNil(table.updateValue(99, forName: [UInt8](repeating: 7, count: 300)[...]))
        model[[UInt8](repeating: 7, count: 300)] = 99
        assertSame(table, model)
    }

    /// A prefetch reads nothing the program sees: on a table with no index yet, or none any more,
    /// it does nothing, and the empty name is a name like the others.
    func testPrefetchOnAnEmptyTableAndOfTheEmptyName() {
        var table = NameTable<Int>()
        table.prefetch(bytes("a"))
        table.prefetch([][...])
        table.updateValue(1, forName: bytes("a"))
        table.prefetch([][...])
        table.prefetch(bytes("a"))
        XCTAssertEqual(table[bytes("a")], 1)
        table.removeAll()
        table.prefetch(bytes("a"))
        XCTAssertNil(table[bytes("a")])
    }

    func testGrowingToManyAndEmptyingAgain() {
        var table = NameTable<Int>()
        let names = (0..<(scale == .stress ? 100_000 : 10_000)).map { Array("f\($0)".utf8) }
        for (index, name) in names.enumerated() { XCTAssertNil(table.updateValue(index, forName: name[...])) }
        XCTAssertEqual(table.count, names.count)
        for (index, name) in names.enumerated() where table[name[...]] != index {
            XCTFail("\(name): \(String(describing: table[name[...]]))")
        }
        // Every other name removed, then the rest: the arena is compacted on the way.
        for name in names.enumerated().filter({ $0.offset % 2 == 0 }).map(\.element) {
            XCTAssertNotNil(table.removeValue(forName: name[...]))
        }
        XCTAssertEqual(table.count, names.count / 2)
        // The index grew for 10,000 names to 16,384 slots, past the least a prefetch asks for
        // (``NameTable/prefetchedIndex``), and a removal does not shrink it.
        for (index, name) in names.enumerated() {
            table.prefetch(name[...])
            XCTAssertEqual(table[name[...]], index % 2 == 0 ? nil : index)
        }
        for name in names { table[name[...]] = nil }
        XCTAssertTrue(table.isEmpty)
        XCTAssertNil(table[bytes("f1")])
        table[bytes("again")] = 1
        XCTAssertEqual(table.dictionary(), [Array("again".utf8): 1])
    }

    /// A table starts with no index (an empty directory's costs nothing); each way in and out of
    /// that state answers as a table with an index does.
    func testATableWithNoIndexYetAnswersAndTakesNames() {
        var table = NameTable<Int>(minimumCapacity: 0)
        XCTAssertNil(table[bytes("a")])
        XCTAssertNil(table.record(forName: bytes("a")))
        XCTAssertNil(table.removeValue(forName: bytes("a")))
        table.reserveCapacity(0)
        table[bytes("a")] = 1
        assertSame(table, [Array("a".utf8): 1])
        table.removeAll()
        XCTAssertNil(table[bytes("a")])
        var sized = NameTable<Int>(minimumCapacity: 3, nameBytes: 3)
        for (index, name) in ["x", "y", "z", "w"].enumerated() { sized[bytes(name)] = index }
        assertSame(sized, ["x": 0, "y": 1, "z": 2, "w": 3].reduce(into: [:]) { $0[Array($1.key.utf8)] = $1.value })
    }

    func testNamesThatDifferOnlyInLengthOrInOneByte() {
        var table = NameTable<Int>()
        let names: [[UInt8]] = [
            [], [0], [0, 0], [1], Array("a".utf8), Array("a\u{0}".utf8), Array("ab".utf8), Array("ba".utf8),
            Array("abcdefgh".utf8), Array("abcdefghi".utf8), Array("abcdefgi".utf8),
            [UInt8](repeating: 0xFF, count: 255), [UInt8](repeating: 0xFF, count: 254),
        ]
        for (index, name) in names.enumerated() { table[name[...]] = index }
        XCTAssertEqual(table.count, names.count)
        for (index, name) in names.enumerated() { XCTAssertEqual(table[name[...]], index, "\(name)") }
    }

    /// Whether a directory has more names lacking inodes than a limit is asked of the values
    /// alone: the count stops one past the limit, and is exact below it.
    func testCountingValuesStopsOnePastTheLimit() {
        var table = NameTable<Int>()
        for index in 0..<100 { table[bytes("f\(index)")] = index }
        table.removeValue(forName: bytes("f0"))  // the last record moved into its place
        let even = { (value: Int) in value.isMultiple(of: 2) }
        XCTAssertEqual(table.count(where: even, upTo: 100), 49, "f2 ... f98: all counted below the limit")
        XCTAssertEqual(table.count(where: even, upTo: 49), 49, "exactly the limit")
        XCTAssertEqual(table.count(where: even, upTo: 10), 11, "one past the limit, then no further")
        XCTAssertEqual(table.count(where: even, upTo: 0), 1)
        XCTAssertEqual(table.count(where: { $0 > 1_000 }, upTo: 5), 0)
        XCTAssertEqual(NameTable<Int>().count(where: { _ in true }, upTo: 3), 0, "an empty table")
    }

    /// A catching-up watcher keeps a copy of the table while the router goes on changing its own.
    func testACopyIsNotChangedByTheOriginal() {
        var table = NameTable<Int>()
        for index in 0..<100 { table[bytes("f\(index)")] = index }
        let copy = table
        for index in 0..<50 { table[bytes("f\(index)")] = nil }
        for index in 100..<300 { table[bytes("f\(index)")] = index }
        if let record = table.record(forName: bytes("f99")) { table[record: record] = -1 }
        XCTAssertEqual(copy.count, 100)
        for index in 0..<100 { XCTAssertEqual(copy[bytes("f\(index)")], index) }
        XCTAssertEqual(table[bytes("f99")], -1)
    }
}
