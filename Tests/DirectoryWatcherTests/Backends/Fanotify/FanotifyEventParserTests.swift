import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The fanotify parser on hand-built bytes, laid out as the kernel writes them (checked against a
/// real group in ``testARealGroupsRecordsParse``), and what it must never trust.
final class FanotifyEventParserTests: XCTestCase {
    private static let fileSystemID: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]

    /// An information record of a handle (type 1), or of a directory's handle and a name (2, 10, 12).
    private func information(type: UInt8, handle: [UInt8], handleType: Int32 = 1, name: [UInt8]? = nil) -> [UInt8] {
        var body: [UInt8] = Self.fileSystemID
        withUnsafeBytes(of: UInt32(handle.count)) { body += $0 }
        withUnsafeBytes(of: handleType) { body += $0 }
        body += handle
        if let name { body += name + [0] }
        let length = 4 + body.count
        var bytes: [UInt8] = [type, 0]
        withUnsafeBytes(of: UInt16(length)) { bytes += $0 }
        return bytes + body
    }

    private func event(mask: UInt64, fd: Int32 = -1, version: UInt8 = 3, _ records: [UInt8]...) -> [UInt8] {
        let information = records.joined()
        var bytes: [UInt8] = []
        withUnsafeBytes(of: UInt32(24 + information.count)) { bytes += $0 }
        bytes += [version, 0]
        withUnsafeBytes(of: UInt16(24)) { bytes += $0 }
        withUnsafeBytes(of: mask) { bytes += $0 }
        withUnsafeBytes(of: fd) { bytes += $0 }
        withUnsafeBytes(of: Int32(4242)) { bytes += $0 }
        return bytes + information
    }

    private func parse(_ bytes: [UInt8]) -> FanotifyEventParser.Parsed {
        bytes.withUnsafeBytes { FanotifyEventParser.parse($0) }
    }

    private func handle(_ bytes: [UInt8]) -> KernelHandle {
        KernelHandle(fileSystemID: Self.fileSystemID, type: 1, bytes: bytes)
    }

    func testAnEntryEventGivesItsDirectoryAndName() {
        let bytes = event(
            mask: UInt64(EventMask.create | EventMask.modify),
            information(type: 2, handle: [9, 9, 9, 9, 9, 9, 9, 9], name: Array("report.txt".utf8)),
            information(type: 1, handle: [7, 7, 7, 7]))
        let parsed = parse(bytes)
        XCTAssertFalse(parsed.isMalformed)
        // A file's own handle is not kept: only a directory's creation needs it.
        XCTAssertEqual(
            parsed.events,
            [
                MarkEvent(
                    mask: UInt64(EventMask.create | EventMask.modify), directory: handle([9, 9, 9, 9, 9, 9, 9, 9]),
                    name: Array("report.txt".utf8))
            ])
    }

    /// The event loop parses every read into the same arrays: a read's copy is written over only
    /// when no record of it is still held (a rename's first half waiting for its pair keeps its
    /// handles and name), and the events of one read follow none of the last one's.
    func testAReadsCopyIsReusedUnlessARecordOfItIsStillHeld() {
        var storage: [UInt8] = []
        var events: [MarkEvent] = []
        var descriptors: [Int32] = []
        func read(_ bytes: [UInt8]) -> Bool {
            bytes.withUnsafeBytes {
                FanotifyEventParser.parse($0, copyingInto: &storage, appendingTo: &events, descriptors: &descriptors)
            }
        }
        let directory: [UInt8] = [9, 9, 9, 9, 9, 9, 9, 9]
        XCTAssertFalse(
            read(
                event(
                    mask: UInt64(EventMask.create), information(type: 2, handle: directory, name: Array("first".utf8))))
        )
        let held = events[0]
        events.removeAll(keepingCapacity: true)
        let heldCopy = storage.withUnsafeBufferPointer { $0.baseAddress }

        XCTAssertFalse(
            read(
                event(
                    mask: UInt64(EventMask.delete),
                    information(type: 2, handle: [8, 8, 8, 8], name: Array("other".utf8)))))
        XCTAssertEqual(
            events,
            [MarkEvent(mask: UInt64(EventMask.delete), directory: handle([8, 8, 8, 8]), name: Array("other".utf8))])
        XCTAssertEqual(held.name, Array("first".utf8), "the held record's name was written over")
        XCTAssertEqual(held.directory, handle(directory), "the held record's handle was written over")
        XCTAssertNotEqual(storage.withUnsafeBufferPointer { $0.baseAddress }, heldCopy)

        // Nothing held now: the next read goes into the same copy.
        events.removeAll(keepingCapacity: true)
        let reused = storage.withUnsafeBufferPointer { $0.baseAddress }
        XCTAssertFalse(
            read(
                event(
                    mask: UInt64(EventMask.modify), fd: 42,
                    information(type: 2, handle: directory, name: Array("third".utf8)))))
        XCTAssertEqual(
            events, [MarkEvent(mask: UInt64(EventMask.modify), directory: handle(directory), name: Array("third".utf8))]
        )
        XCTAssertEqual(descriptors, [42])
        XCTAssertEqual(storage.withUnsafeBufferPointer { $0.baseAddress }, reused)
    }

    func testADirectorysCreationGivesItsOwnHandleToo() {
        let bytes = event(
            mask: UInt64(EventMask.create) | MarkBits.onDirectory,
            information(type: 2, handle: [9, 9, 9, 9, 9, 9, 9, 9], name: Array("report.txt".utf8)),
            information(type: 1, handle: [7, 7, 7, 7]))
        let parsed = parse(bytes)
        XCTAssertFalse(parsed.isMalformed)
        XCTAssertEqual(
            parsed.events,
            [
                MarkEvent(
                    mask: UInt64(EventMask.create) | MarkBits.onDirectory,
                    directory: handle([9, 9, 9, 9, 9, 9, 9, 9]), name: Array("report.txt".utf8),
                    object: handle([7, 7, 7, 7]))
            ])
        XCTAssertEqual(parsed.events.first?.directory?.type, 1)
        XCTAssertEqual(parsed.events.first?.directory?.bytes, [9, 9, 9, 9, 9, 9, 9, 9])
    }

    func testARenameGivesBothDirectoriesAndNames() {
        let bytes = event(
            mask: MarkBits.rename | MarkBits.onDirectory,
            information(type: 10, handle: [1], name: Array("old".utf8)),
            information(type: 12, handle: [2], name: Array("new".utf8)))
        let parsed = parse(bytes).events
        XCTAssertEqual(parsed.count, 1)
        XCTAssertTrue(parsed[0].isRename)
        XCTAssertTrue(parsed[0].isDirectory)
        XCTAssertEqual(parsed[0].directory, handle([1]))
        XCTAssertEqual(parsed[0].name, Array("old".utf8))
        XCTAssertEqual(parsed[0].newDirectory, handle([2]))
        XCTAssertEqual(parsed[0].newName, Array("new".utf8))
    }

    /// Each record's handle is its own, read from its own bytes: one that differs from the
    /// record before's by a byte, its length or its type is not taken for it.
    func testEachRecordKeepsItsOwnDirectory() {
        let bytes =
            event(mask: UInt64(EventMask.create), information(type: 2, handle: [1, 1], name: Array("a".utf8)))
            + event(mask: UInt64(EventMask.create), information(type: 2, handle: [1, 1], name: Array("b".utf8)))
            + event(mask: UInt64(EventMask.create), information(type: 2, handle: [1, 2], name: Array("c".utf8)))
            + event(mask: UInt64(EventMask.create), information(type: 2, handle: [1, 1, 0], name: Array("d".utf8)))
            + event(
                mask: UInt64(EventMask.create),
                information(type: 2, handle: [1, 1], handleType: 2, name: Array("e".utf8)))
        let parsed = parse(bytes).events
        XCTAssertEqual(parsed.map(\.name), ["a", "b", "c", "d", "e"].map { Array($0.utf8) })
        XCTAssertEqual(parsed.map { $0.directory?.bytes.map { $0 } }, [[1, 1], [1, 1], [1, 2], [1, 1, 0], [1, 1]])
        XCTAssertEqual(parsed.map { $0.directory?.type }, [1, 1, 1, 1, 2])
        XCTAssertEqual(parsed.map { $0.names(handle([1, 1])) }, [true, true, false, false, false])
    }

    func testAnOverflowHasNoRecordAndSeveralEventsFollowOneAnother() {
        let bytes =
            event(mask: MarkBits.queueOverflow)
            + event(mask: UInt64(EventMask.attributes), information(type: 2, handle: [3], name: Array(".".utf8)))
        let parsed = parse(bytes)
        XCTAssertFalse(parsed.isMalformed)
        XCTAssertEqual(parsed.events.count, 2)
        XCTAssertTrue(parsed.events[0].isOverflow)
        XCTAssertTrue(parsed.events[1].isAboutDirectoryItself)
    }

    func testADescriptorTheKernelOpenedIsHandedBackToClose() {
        XCTAssertEqual(parse(event(mask: UInt64(EventMask.modify), fd: 17)).descriptors, [17])
        XCTAssertEqual(parse(event(mask: UInt64(EventMask.modify))).descriptors, [])
    }

    func testEveryLengthIsCheckedAgainstTheBytesRead() {
        let whole = event(
            mask: UInt64(EventMask.create), information(type: 2, handle: [1, 2, 3, 4], name: Array("name".utf8)))
        // Cut anywhere: a record that does not fit is reported, and nothing past the read is read.
        for cut in 1..<whole.count {
            let parsed = parse(Array(whole[..<cut]))
            XCTAssertTrue(parsed.isMalformed, "cut at \(cut)")
            XCTAssertTrue(parsed.events.allSatisfy { $0.name.isEmpty || $0.name == Array("name".utf8) })
            // A handle is kept only where it fits: read back from the record's bytes, it is whole.
            XCTAssertTrue(parsed.events.allSatisfy { $0.directory == nil || $0.directory == handle([1, 2, 3, 4]) })
        }
        // A handle longer than its record, a name without its NUL, a record length of 0.
        var longHandle = whole
        longHandle[24 + 4 + 8] = 200
        XCTAssertTrue(parse(longHandle).isMalformed)
        var noNul = whole
        noNul[noNul.count - 1] = UInt8(ascii: "x")
        XCTAssertTrue(parse(noNul).isMalformed)
        var zeroLength = whole
        zeroLength[24 + 2] = 0
        zeroLength[24 + 3] = 0
        XCTAssertTrue(parse(zeroLength).isMalformed)
        // Another metadata version is not read as this one.
        XCTAssertTrue(parse(event(mask: UInt64(EventMask.create), version: 4)).isMalformed)
        // An event length shorter than its metadata, or past the read.
        var short = whole
        short[0] = 8
        XCTAssertTrue(parse(short).isMalformed)
        var past = whole
        past[0] = UInt8(truncatingIfNeeded: whole.count + 1)
        XCTAssertTrue(parse(past).isMalformed)
    }

    /// The layout checked against the kernel: a group of this process marks the file system of a
    /// temporary directory, a file is made there, and the record read names its directory (whose
    /// handle `name_to_handle_at` gives too) and the file.
    func testARealGroupsRecordsParse() throws {
        let system = System()
        let directory = TemporaryDirectory()
        let group = try system.fanotifyInit()
        defer { system.close(group) }
        let open = try system.openDirectory(FileSystemPath(directory.path))
        defer { system.close(open) }
        let id = try system.fileSystemID(open)
        let expected = try system.fileHandle(in: open, name: nil, fileSystemID: id)
        try system.fanotifyMark(
            group, fileSystemOf: FileSystemPath(directory.path), mask: FanotifyTranslation.baseMask, add: true)
        XCTAssertEqual(mkdir(directory.url("made"), 0o755), 0)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var found: MarkEvent?
        while found == nil {
            let count = try XCTUnwrap(buffer.withUnsafeMutableBytes { try system.read(group, into: $0) })
            let parsed = buffer.withUnsafeBytes {
                FanotifyEventParser.parse(UnsafeRawBufferPointer(rebasing: $0[..<count]))
            }
            XCTAssertFalse(parsed.isMalformed)
            found = parsed.events.first { $0.directory == expected && $0.name == Array("made".utf8) }
        }
        XCTAssertNotEqual((found?.mask ?? 0) & UInt64(EventMask.create), 0)
        XCTAssertNotNil(found?.object, "the new directory's own handle (FAN_REPORT_TARGET_FID)")
    }
}
