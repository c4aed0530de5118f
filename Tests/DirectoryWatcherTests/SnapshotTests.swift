import Foundation
import XCTest

@testable import DirectoryWatcher

/// The `getdents64` parser on hand-built records.
final class DirectoryEntryParserTests: XCTestCase {
    /// One `linux_dirent64` record: inode, offset, length, type, name, NUL padding to 8 bytes.
    private func record(inode: UInt64, type: UInt8, name: [UInt8], paddedLength: Int? = nil) -> [UInt8] {
        let length = paddedLength ?? (DirectoryEntryParser.headerSize + name.count + 1 + 7) / 8 * 8
        var bytes: [UInt8] = []
        withUnsafeBytes(of: inode) { bytes += $0 }
        withUnsafeBytes(of: Int64(0)) { bytes += $0 }
        withUnsafeBytes(of: UInt16(length)) { bytes += $0 }
        bytes.append(type)
        bytes += name
        bytes += [UInt8](repeating: 0, count: length - DirectoryEntryParser.headerSize - name.count)
        return bytes
    }

    private func parse(_ bytes: [UInt8]) -> DirectoryEntryParser.Result {
        bytes.withUnsafeBytes { DirectoryEntryParser.parse($0) }
    }

    func testEntriesFollowOneAnotherAndDotsAreLeftOut() {
        let bytes =
            record(inode: 1, type: UInt8(DT_DIR), name: Array(".".utf8))
            + record(inode: 2, type: UInt8(DT_DIR), name: Array("..".utf8))
            + record(inode: 7, type: UInt8(DT_REG), name: Array("a".utf8))
            + record(inode: 8, type: UInt8(DT_DIR), name: Array("a-longer-name-than-the-header".utf8))
            + record(inode: 9, type: UInt8(DT_UNKNOWN), name: [0xFF, 0x0A, 0x2E])
        XCTAssertEqual(
            parse(bytes),
            .init(
                entries: [
                    .init(name: Array("a".utf8), inode: 7, type: UInt8(DT_REG)),
                    .init(name: Array("a-longer-name-than-the-header".utf8), inode: 8, type: UInt8(DT_DIR)),
                    .init(name: [0xFF, 0x0A, 0x2E], inode: 9, type: UInt8(DT_UNKNOWN)),
                ], malformedTrailingBytes: 0))
    }

    func testANameThatFillsItsRecordWithoutANulEndsWithTheRecord() {
        let name = Array("abcde".utf8)
        XCTAssertEqual(
            parse(record(inode: 3, type: UInt8(DT_REG), name: name, paddedLength: DirectoryEntryParser.headerSize + 5))
                .entries,
            [.init(name: name, inode: 3, type: UInt8(DT_REG))])
    }

    func testATruncatedOrImpossibleRecordIsNeverReadPast() {
        let whole = record(inode: 3, type: UInt8(DT_REG), name: Array("file".utf8))
        let truncated = whole + Array(whole.prefix(whole.count - 3))
        XCTAssertEqual(parse(truncated).entries.count, 1)
        XCTAssertEqual(parse(truncated).malformedTrailingBytes, whole.count - 3)
        // A record length shorter than the header would never advance: it ends the parse.
        var zeroLength = whole
        zeroLength[16] = 0
        zeroLength[17] = 0
        XCTAssertEqual(parse(zeroLength), .init(entries: [], malformedTrailingBytes: whole.count))
    }
}

/// Snapshots read from real directories, and the differences between two of them.
final class SnapshotTests: XCTestCase {
    private var directory: TemporaryDirectory!

    override func setUp() {
        directory = TemporaryDirectory()
    }

    override func tearDown() {
        directory = nil
    }

    private func read(system: System = System()) throws -> Snapshot {
        try Snapshot.read(FileSystemPath(directory.path), system: system)
    }

    private func changes(_ old: Snapshot, _ new: Snapshot) -> [DirectoryChange] {
        Snapshot.changes(from: old, to: new, in: FileSystemPath(directory.path))
    }

    func testReadingListsEveryEntryWithItsKindAndStatus() throws {
        directory.touch("file")
        directory.write("file", "12345")
        directory.mkdir("dir")
        symlink("file", directory.url("link"))
        let odd: [UInt8] = [0x6F, 0xFF, 0x0A]
        let oddPath = FileSystemPath(directory.path).appending(bytes: odd)
        let fd = oddPath.withCString { open($0, O_CREAT | O_WRONLY, 0o600) }
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        let snapshot = try read()
        XCTAssertEqual(
            Set(snapshot.entries.keys), [Array("file".utf8), Array("dir".utf8), Array("link".utf8), odd])
        let file = try XCTUnwrap(snapshot.entries[Array("file".utf8)])
        XCTAssertEqual(file.kind, .file)
        XCTAssertEqual(file.size, 5)
        XCTAssertEqual(file.permissions, 0o644 & ~UInt32(umask(0o022)))
        XCTAssertEqual(snapshot.entries[Array("dir".utf8)]?.kind, .directory)
        XCTAssertEqual(snapshot.entries[Array("link".utf8)]?.kind, .symbolicLink, "links are not followed")
        XCTAssertEqual(snapshot.entries[odd]?.permissions, 0o600)
        var status = stat()
        XCTAssertEqual(lstat(directory.url("file"), &status), 0)
        XCTAssertEqual(file.inode, UInt64(status.st_ino))
        XCTAssertEqual(file.device, UInt64(status.st_dev))
    }

    func testManyEntriesTakeManyReads() throws {
        for index in 0..<3_000 { directory.touch("entry-with-a-long-name-\(index)") }
        XCTAssertEqual(try read().entries.count, 3_000)
    }

    /// A poll's fast path: the same listing is unchanged, across several reads of the
    /// directory; any change of an entry, or of the set of names, is not.
    func testUnchangedIsTrueOnlyForTheSameEntriesWithTheSameStatus() throws {
        for index in 0..<3_000 { directory.touch("entry-with-a-long-name-\(index)") }
        func unchanged(since old: Snapshot) throws -> Bool {
            try Snapshot.isUnchanged(FileSystemPath(directory.path), since: old, system: System())
        }
        var old = try read()
        XCTAssertTrue(try unchanged(since: old), "the same 3,000 entries")
        directory.write("entry-with-a-long-name-2999", "more")
        XCTAssertFalse(try unchanged(since: old), "one written")
        old = try read()
        directory.touch("new")
        XCTAssertFalse(try unchanged(since: old), "one more")
        old = try read()
        XCTAssertEqual(unlink(directory.url("new")), 0)
        XCTAssertFalse(try unchanged(since: old), "one fewer")
        old = try read()
        XCTAssertEqual(rename(directory.url("entry-with-a-long-name-7"), directory.url("renamed")), 0)
        XCTAssertFalse(try unchanged(since: old), "one renamed")
        old = try read()
        XCTAssertEqual(chmod(directory.url("renamed"), 0o600), 0)
        XCTAssertFalse(try unchanged(since: old), "one's mode changed")
        XCTAssertTrue(try unchanged(since: try read()))
        XCTAssertThrowsError(
            try Snapshot.isUnchanged(FileSystemPath(directory.url("missing")), since: old, system: System()))
    }

    func testAnEntryGoneBeforeItsStatusIsLeftOut() throws {
        directory.touch("stays")
        directory.touch("vanishes")
        let system = System(
            .live.failing(
                \.entryStatus, errno: ENOENT, times: 1,
                when: { _, name, _ in String(cString: name) == "vanishes" }))
        XCTAssertEqual(Set(try read(system: system).entries.keys), [Array("stays".utf8)])
    }

    func testAFailureNamesTheCall() {
        XCTAssertThrowsError(try Snapshot.read(FileSystemPath(directory.url("missing")), system: System())) { error in
            XCTAssertEqual(error as? SyscallError, SyscallError(function: "open", errno: ENOENT))
        }
        let failing = System(.live.failing(\.entryStatus, errno: EACCES))
        directory.touch("a")
        XCTAssertThrowsError(try read(system: failing)) { error in
            XCTAssertEqual(error as? SyscallError, SyscallError(function: "statx", errno: EACCES))
        }
    }

    func testEachKindOfChange() throws {
        directory.touch("removed")
        directory.touch("renamed")
        directory.touch("written")
        directory.touch("chmodded")
        directory.mkdir("subdir")
        let before = try read()
        unlink(directory.url("removed"))
        rename(directory.url("renamed"), directory.url("renamed-to"))
        directory.write("written", "more")
        chmod(directory.url("chmodded"), 0o600)
        directory.touch("subdir/inside")  // the subdirectory's times move: not a change here
        directory.touch("created")
        XCTAssertEqual(
            changes(before, try read()),
            [
                DirectoryChange(.removed, directory.url("removed")),
                DirectoryChange(.renamed, directory.url("renamed-to"), from: directory.url("renamed")),
                DirectoryChange(.created, directory.url("created")),
                DirectoryChange(.attributesChanged, directory.url("chmodded")),
                DirectoryChange(.modified, directory.url("written")),
            ])
    }

    func testARenameOverAnotherFileReplacesIt() throws {
        directory.touch("a")
        directory.touch("b")
        let before = try read()
        rename(directory.url("a"), directory.url("b"))
        XCTAssertEqual(
            changes(before, try read()), [DirectoryChange(.renamed, directory.url("b"), from: directory.url("a"))])
    }

    func testAChainOfRenamesComesInAnOrderThatApplies() throws {
        directory.touch("a")
        directory.touch("b")
        let before = try read()
        rename(directory.url("b"), directory.url("c"))
        rename(directory.url("a"), directory.url("b"))
        XCTAssertEqual(
            changes(before, try read()),
            [
                DirectoryChange(.renamed, directory.url("c"), from: directory.url("b")),
                DirectoryChange(.renamed, directory.url("b"), from: directory.url("a")),
            ])
    }

    func testTwoNamesSwappedAreOneRenameAndAReplacement() throws {
        directory.touch("a")
        directory.touch("b")
        let before = try read()
        rename(directory.url("a"), directory.url("t"))
        rename(directory.url("b"), directory.url("a"))
        rename(directory.url("t"), directory.url("b"))
        XCTAssertEqual(
            changes(before, try read()),
            [
                DirectoryChange(.removed, directory.url("b")),
                DirectoryChange(.renamed, directory.url("b"), from: directory.url("a")),
                DirectoryChange(.created, directory.url("a")),
            ])
    }

    func testAFileReplacedByANewOneIsRemovedAndCreatedEvenWhenTheInodeIsReused() throws {
        directory.touch("f")
        let before = try read()
        unlink(directory.url("f"))
        directory.touch("g")
        directory.touch("f")
        let after = try read()
        XCTAssertEqual(
            changes(before, after),
            [
                DirectoryChange(.removed, directory.url("f")),
                DirectoryChange(.created, directory.url("f")),
                DirectoryChange(.created, directory.url("g")),
            ])
    }

    func testAnotherHardLinkIsACreation() throws {
        directory.touch("a")
        let before = try read()
        link(directory.url("a"), directory.url("b"))
        XCTAssertEqual(
            changes(before, try read()),
            [
                DirectoryChange(.created, directory.url("b")),
                // The link count is an attribute of the file both names share.
                DirectoryChange(.attributesChanged, directory.url("a")),
            ])
    }

    func testNoChangeNoDifference() throws {
        directory.touch("a")
        directory.mkdir("d")
        XCTAssertEqual(changes(try read(), try read()), [])
    }
}

/// Random operations on a real directory: the difference between the snapshots before and after
/// is the net effect of the operations. Seeded and reproducible: a failure prints its seed, and
/// `DIRWATCH_PROPERTY_SEED=N` runs that one again; `DIRWATCH_PROPERTY_ROUNDS=N` runs more.
final class SnapshotPropertyTests: XCTestCase {
    /// What the test knows of the directory: each name's file identity, and how many times the
    /// file was written and had its permissions changed.
    private struct Model {
        struct File: Equatable {
            var id: Int
            var isDirectory: Bool
            var writes = 0
            var chmods = 0
        }
        var files: [String: File] = [:]
        var nextID = 0
    }

    func testTheDifferenceIsTheNetEffectOfRandomOperations() throws {
        let environment = ProcessInfo.processInfo.environment
        let rounds = environment["DIRWATCH_PROPERTY_ROUNDS"].flatMap(Int.init) ?? 150
        let seeds: [UInt64] =
            environment["DIRWATCH_PROPERTY_SEED"].flatMap(UInt64.init).map { [$0] }
            ?? (0..<UInt64(rounds)).map { $0 &* 0x9E37_79B9_7F4A_7C15 &+ 1 }
        for seed in seeds {
            try check(seed: seed)
        }
    }

    private func check(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let directory = TemporaryDirectory()
        var model = Model()
        let names = (0..<8).map { "n\($0)" }
        // A random starting state, then a snapshot, then random operations, then another.
        for _ in 0..<Int.random(in: 0...6, using: &random) { operate(&model, in: directory, names, &random) }
        let start = model
        let before = try Snapshot.read(FileSystemPath(directory.path), system: System())
        var log: [String] = []
        for _ in 0..<Int.random(in: 1...12, using: &random) {
            log.append(operate(&model, in: directory, names, &random))
        }
        let after = try Snapshot.read(FileSystemPath(directory.path), system: System())
        let reported = Snapshot.changes(from: before, to: after, in: FileSystemPath(directory.path))
        let context = "seed \(seed) (DIRWATCH_PROPERTY_SEED=\(seed)); operations: \(log); reported: \(reported)"

        // Applied to the names before, the changes give the names after, each holding the file
        // the model says it holds (renames follow the file; a created name holds a file the
        // start did not have under a name that left, unless two names were swapped).
        var applied: [String: Int?] = start.files.mapValues { Optional($0.id) }
        for change in reported {
            let name = String(decoding: change.path.bytes.split(separator: 0x2F).last ?? [], as: UTF8.self)
            switch change.kind {
            case .removed:
                XCTAssertTrue(applied.removeValue(forKey: name) != nil, "removed a name that was not there: \(context)")
            case .created:
                applied[name] = .some(nil)
            case .renamed:
                let old = String(decoding: change.oldPath?.bytes.split(separator: 0x2F).last ?? [], as: UTF8.self)
                let moved = applied.removeValue(forKey: old)
                XCTAssertTrue(moved != nil, "renamed from a name that was not there: \(context)")
                applied[name] = moved ?? .some(nil)
            case .modified, .attributesChanged:
                XCTAssertTrue(applied[name] != nil, "changed a name that is not there: \(context)")
            default:
                XCTFail("unexpected kind \(change.kind): \(context)")
            }
        }
        XCTAssertEqual(Set(applied.keys), Set(model.files.keys), "names: \(context)")
        for (name, id) in applied {
            guard let id, let file = model.files[name] else { continue }
            XCTAssertEqual(id, file.id, "\(name) holds another file than the changes say: \(context)")
        }
        // A file that kept its identity under a new name was reported as renamed, not created,
        // unless it was part of a swap.
        let startNames = Dictionary(uniqueKeysWithValues: start.files.map { ($0.value.id, $0.key) })
        for change in reported where change.kind == .created {
            let name = String(decoding: change.path.bytes.split(separator: 0x2F).last ?? [], as: UTF8.self)
            guard let file = model.files[name], let oldName = startNames[file.id], oldName != name else { continue }
            XCTAssertTrue(
                reported.contains { $0.kind == .removed && $0.path == FileSystemPath(directory.url(oldName)) }
                    || reported.contains { $0.kind == .renamed && $0.oldPath == FileSystemPath(directory.url(name)) },
                "\(name) (from \(oldName)) reported as created outside a swap: \(context)")
        }
        // Written files are modified; files whose permissions alone changed have new attributes.
        let startByID = Dictionary(uniqueKeysWithValues: start.files.values.map { ($0.id, $0) })
        for (name, file) in model.files {
            guard let old = startByID[file.id], !file.isDirectory else { continue }
            let path = FileSystemPath(directory.url(name))
            let kinds = Set(reported.filter { $0.path == path }.map(\.kind))
            if file.writes != old.writes {
                XCTAssertTrue(kinds.contains(.modified), "\(name) was written: \(context)")
            } else if file.chmods != old.chmods {
                XCTAssertTrue(kinds.contains(.attributesChanged), "\(name) changed permissions: \(context)")
            } else {
                XCTAssertFalse(kinds.contains(.modified), "\(name) was not written: \(context)")
            }
        }
    }

    /// One random operation, applied to the directory and to the model; returns what it did.
    @discardableResult
    private func operate(
        _ model: inout Model, in directory: TemporaryDirectory, _ names: [String], _ random: inout SplitMix64
    ) -> String {
        let name = names.randomElement(using: &random)!
        let other = names.randomElement(using: &random)!
        let existing = model.files[name]
        switch Int.random(in: 0..<7, using: &random) {
        case 0 where existing == nil:
            directory.touch(name)
            model.files[name] = .init(id: model.nextID, isDirectory: false)
            model.nextID += 1
            return "create \(name)"
        case 1 where existing?.isDirectory == false:
            directory.write(name, String(repeating: "x", count: Int.random(in: 1...5, using: &random)))
            model.files[name]?.writes += 1
            return "append \(name)"
        case 2
        where existing != nil && name != other
            && (model.files[other] == nil || model.files[other]?.isDirectory == existing?.isDirectory):
            // rename(2) replaces a file with a file, or an empty directory with a directory.
            if existing?.isDirectory == true, model.files[other] != nil { return "skip" }
            rename(directory.url(name), directory.url(other))
            model.files[other] = model.files.removeValue(forKey: name)
            return "rename \(name) \(other)"
        case 3 where existing?.isDirectory == false:
            unlink(directory.url(name))
            model.files[name] = nil
            return "remove \(name)"
        case 4 where existing == nil:
            directory.mkdir(name)
            model.files[name] = .init(id: model.nextID, isDirectory: true)
            model.nextID += 1
            return "mkdir \(name)"
        case 5 where existing?.isDirectory == true:
            rmdir(directory.url(name))
            model.files[name] = nil
            return "rmdir \(name)"
        case 6 where existing != nil:
            let mode: mode_t = (existing!.chmods % 2 == 0) ? 0o600 : 0o644
            chmod(directory.url(name), existing!.isDirectory ? mode | 0o100 : mode)
            model.files[name]?.chmods += 1
            return "chmod \(name)"
        default:
            return "skip"
        }
    }
}

/// A small seeded generator, so a failing sequence can be run again from its seed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
