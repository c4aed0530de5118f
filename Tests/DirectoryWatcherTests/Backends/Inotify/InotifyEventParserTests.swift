import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The parser on hand-built bytes: the layout the kernel writes, and what it must never trust.
final class InotifyEventParserTests: XCTestCase {
    /// One record as the kernel lays it out: header, name, NUL padding to `paddedLength`.
    private func record(wd: Int32, mask: UInt32, cookie: UInt32 = 0, name: [UInt8] = [], paddedLength: Int? = nil)
        -> [UInt8]
    {
        let length = paddedLength ?? (name.isEmpty ? 0 : (name.count + 1 + 15) / 16 * 16)
        var bytes: [UInt8] = []
        withUnsafeBytes(of: wd) { bytes += $0 }
        withUnsafeBytes(of: mask) { bytes += $0 }
        withUnsafeBytes(of: cookie) { bytes += $0 }
        withUnsafeBytes(of: UInt32(length)) { bytes += $0 }
        bytes += name + [UInt8](repeating: 0, count: length - name.count)
        return bytes
    }

    private func parse(_ bytes: [UInt8]) -> InotifyEventParser.Result {
        bytes.withUnsafeBytes { InotifyEventParser.parse($0) }
    }

    /// The event loop parses every read into the same two arrays: a read's copy is written over
    /// only when no event of it is still held (a move waiting for its pair keeps its name).
    func testAReadsCopyIsReusedUnlessAnEventOfItIsStillHeld() {
        var storage: [UInt8] = []
        var events: [BackendEvent] = []
        func read(_ bytes: [UInt8]) -> Int {
            bytes.withUnsafeBytes { InotifyEventParser.parse($0, copyingInto: &storage, appendingTo: &events) }
        }
        XCTAssertEqual(read(record(wd: 1, mask: EventMask.movedFrom, cookie: 5, name: Array("first".utf8))), 0)
        let held = events[0]
        events.removeAll(keepingCapacity: true)
        let heldCopy = storage.withUnsafeBufferPointer { $0.baseAddress }

        XCTAssertEqual(read(record(wd: 1, mask: EventMask.create, name: Array("other".utf8))), 0)
        XCTAssertEqual(events, [BackendEvent(wd: 1, mask: EventMask.create, name: Array("other".utf8))])
        XCTAssertEqual(Array(held.name), Array("first".utf8), "the held event's name was written over")
        XCTAssertNotEqual(storage.withUnsafeBufferPointer { $0.baseAddress }, heldCopy)

        // Nothing held now: the next read goes into the same copy.
        events.removeAll(keepingCapacity: true)
        let reused = storage.withUnsafeBufferPointer { $0.baseAddress }
        XCTAssertEqual(read(record(wd: 2, mask: EventMask.delete, name: Array("third".utf8))), 0)
        XCTAssertEqual(events, [BackendEvent(wd: 2, mask: EventMask.delete, name: Array("third".utf8))])
        XCTAssertEqual(storage.withUnsafeBufferPointer { $0.baseAddress }, reused)
    }

    func testEmptyBufferHasNoEvents() {
        XCTAssertEqual(parse([]), .init(events: [], malformedTrailingBytes: 0))
    }

    func testRecordsOfDifferentLengthsFollowOneAnother() {
        let bytes =
            record(wd: 1, mask: EventMask.create, name: Array("a".utf8))
            + record(wd: 2, mask: EventMask.deleteSelf)
            + record(wd: 1, mask: EventMask.movedFrom, cookie: 77, name: Array("a-much-longer-name.txt".utf8))
        XCTAssertEqual(
            parse(bytes),
            .init(
                events: [
                    BackendEvent(wd: 1, mask: EventMask.create, name: Array("a".utf8)),
                    BackendEvent(wd: 2, mask: EventMask.deleteSelf),
                    BackendEvent(
                        wd: 1, mask: EventMask.movedFrom, cookie: 77, name: Array("a-much-longer-name.txt".utf8)),
                ], malformedTrailingBytes: 0))
    }

    func testAFullReadOfRecordsComesOutWholeAndInOrder() {
        let names = (0..<3000).map { Array("entry-\($0)".utf8) }
        let bytes = names.enumerated().flatMap {
            record(wd: Int32($0.offset), mask: EventMask.create, name: $0.element)
        }
        let result = parse(bytes + [0, 0, 0])
        XCTAssertEqual(result.events.map(\.wd), (0..<3000).map { Int32($0) })
        XCTAssertEqual(result.events.map { Array($0.name) }, names)
        XCTAssertEqual(result.malformedTrailingBytes, 3)
    }

    func testOverflowRecordHasDescriptorMinusOne() {
        let events = parse(record(wd: -1, mask: EventMask.queueOverflow)).events
        XCTAssertEqual(events.count, 1)
        XCTAssertTrue(events[0].isOverflow)
    }

    func testNamesKeepBytesThatAreNotUTF8() {
        let name: [UInt8] = [0x66, 0xFF, 0xFE, 0x0A, 0x1B]
        XCTAssertEqual(parse(record(wd: 3, mask: EventMask.create, name: name)).events.first?.name, name[...])
    }

    func testNameFillingItsWholeLengthNeedsNoTerminator() {
        let name = Array("exactly-16-bytes".utf8)
        XCTAssertEqual(
            parse(record(wd: 3, mask: EventMask.create, name: name, paddedLength: 16)).events.first?.name, name[...])
    }

    func testNamesOutliveTheBufferTheyWereReadInto() {
        // The loop reads every batch into the same buffer: a name must not point into it.
        var buffer =
            record(wd: 1, mask: EventMask.movedFrom, cookie: 4, name: Array("first".utf8))
            + record(wd: 1, mask: EventMask.create, name: Array("second".utf8))
        let events = buffer.withUnsafeBytes { InotifyEventParser.parse($0) }.events
        for index in buffer.indices { buffer[index] = 0xEE }
        XCTAssertEqual(events.map { Array($0.name) }, [Array("first".utf8), Array("second".utf8)])
    }

    func testNameEndsAtTheFirstNul() {
        // The kernel pads with NULs only; a name still ends at the first one whatever follows.
        var bytes = record(wd: 3, mask: EventMask.create, name: Array("ab".utf8), paddedLength: 16)
        bytes[InotifyEventParser.headerSize + 5] = UInt8(ascii: "z")
        XCTAssertEqual(parse(bytes).events, [BackendEvent(wd: 3, mask: EventMask.create, name: Array("ab".utf8))])
    }

    func testRecordsAtOddOffsetsAreReadUnaligned() {
        // A buffer that starts one byte into an allocation: every field load is misaligned.
        let bytes = [0xAA] + record(wd: 9, mask: EventMask.modify, name: Array("x".utf8))
        let events = bytes.withUnsafeBytes { InotifyEventParser.parse(UnsafeRawBufferPointer(rebasing: $0[1...])) }
            .events
        XCTAssertEqual(events, [BackendEvent(wd: 9, mask: EventMask.modify, name: Array("x".utf8))])
    }

    func testTruncatedHeaderIsReportedNotRead() {
        let whole = record(wd: 1, mask: EventMask.create, name: Array("ok".utf8))
        let result = parse(whole + [1, 2, 3, 4, 5])
        XCTAssertEqual(result.events.count, 1)
        XCTAssertEqual(result.malformedTrailingBytes, 5)
    }

    func testLengthBeyondTheBufferIsReportedNotRead() {
        var bytes = record(wd: 1, mask: EventMask.create, name: Array("name".utf8))
        bytes.removeLast(4)  // the header still says 16 name bytes
        let result = parse(bytes)
        XCTAssertEqual(result.events, [])
        XCTAssertEqual(result.malformedTrailingBytes, bytes.count)
    }

    func testHugeLengthDoesNotOverflowArithmetic() {
        var bytes = record(wd: 1, mask: EventMask.create)
        bytes.replaceSubrange(12..<16, with: [0xFF, 0xFF, 0xFF, 0xFF])
        XCTAssertEqual(parse(bytes).events, [])
    }
}
