import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

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
