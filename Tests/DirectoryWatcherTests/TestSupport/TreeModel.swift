import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// A tree as a consumer keeps it from the changes reported: each change applied in order to
/// what was known before (a directory renamed, moved out or removed takes what is below it
/// along), and compared with the disk. What a tree's tests and soaks check.
struct TreeModel {
    /// The watched directory's path.
    let root: String
    /// Relative path to whether the entry is a directory.
    var entries: [String: Bool] = [:]

    init(root: String, entries: [String: Bool] = [:]) {
        self.root = root
        self.entries = entries
    }

    /// A model of the tree as it is on disk now.
    static func ofDisk(_ root: String) -> TreeModel { TreeModel(root: root, entries: walk(root)) }

    /// What differs from the disk, with the changes that did not apply: nil when nothing.
    func differences(_ problems: [String] = []) -> String? {
        differences(from: Self.walk(root), problems)
    }

    /// What differs from `onDisk` (relative path to whether the entry is a directory), with the
    /// changes that did not apply: nil when nothing.
    func differences(from onDisk: [String: Bool], _ problems: [String] = []) -> String? {
        let missing = onDisk.keys.filter { entries[$0] == nil }.sorted()
        let extra = entries.keys.filter { onDisk[$0] == nil }.sorted()
        let wrongType = onDisk.keys.filter { entries[$0] != nil && entries[$0] != onDisk[$0] }.sorted()
        if problems.isEmpty && missing.isEmpty && extra.isEmpty && wrongType.isEmpty { return nil }
        return """
            \(missing.count) missing, \(extra.count) extra, \(wrongType.count) of the wrong type, \
            \(problems.count) changes that do not apply
            missing: \(missing.prefix(20))
            extra: \(extra.prefix(20))
            wrong type: \(wrongType.prefix(20))
            changes that do not apply: \(problems.prefix(20))
            """
    }

    func relative(_ path: FileSystemPath?) -> String? {
        guard let path else { return nil }
        let text = path.description
        if text == root { return "" }
        guard text.hasPrefix(root + "/") else { return nil }
        return String(text.dropFirst(root.count + 1))
    }

    func parentIsKnown(_ path: String) -> Bool {
        guard let slash = path.lastIndex(of: "/") else { return true }
        return entries[String(path[..<slash])] == true
    }

    mutating func removeSubtree(_ path: String) {
        entries[path] = nil
        for key in entries.keys where key.hasPrefix(path + "/") { entries[key] = nil }
    }

    mutating func moveSubtree(_ from: String, _ to: String) {
        var moved: [String: Bool] = [:]
        for (key, isDirectory) in entries where key == from || key.hasPrefix(from + "/") {
            moved[to + key.dropFirst(from.count)] = isDirectory
            entries[key] = nil
        }
        for (key, isDirectory) in moved { entries[key] = isDirectory }
    }

    /// Applies `changes` to the model; returns those that do not apply.
    mutating func apply(_ changes: [DirectoryChange], queueLost: Bool = false, ignoring ignored: String? = nil)
        -> [String]
    {
        var problems: [String] = []
        for change in changes {
            if let ignored, change.path.description.hasPrefix(ignored + "/") { continue }
            if change.kind == .overflow {
                if !queueLost { problems.append("an overflow with no queue lost: \(change)") }
                continue
            }
            guard let path = relative(change.path) else {
                problems.append("outside the tree: \(change)")
                continue
            }
            switch change.kind {
            case .created, .movedIn:
                if change.kind == .created, entries[path] != nil { problems.append("made twice: \(change)") }
                if !parentIsKnown(path) { problems.append("made in a directory never reported: \(change)") }
                removeSubtree(path)
                entries[path] = change.isDirectory
            case .removed, .movedOut:
                // (A removal of an entry never reported changes nothing: an entry made and
                // removed before its directory could be listed.)
                removeSubtree(path)
            case .renamed:
                guard let old = relative(change.oldPath), entries[old] != nil else {
                    problems.append("renamed from nothing: \(change)")
                    entries[path] = change.isDirectory
                    continue
                }
                if !parentIsKnown(path) { problems.append("renamed into a directory never reported: \(change)") }
                if entries[old] != change.isDirectory { problems.append("renamed with the wrong type: \(change)") }
                removeSubtree(path)
                moveSubtree(old, path)
            case .exchanged:
                guard let other = relative(change.oldPath), entries[other] != nil, entries[path] != nil else {
                    problems.append("exchanged with nothing: \(change)")
                    continue
                }
                let swap = "\u{1}swap"
                moveSubtree(path, swap)
                moveSubtree(other, path)
                moveSubtree(swap, other)
            case .modified, .attributesChanged:
                // (A change to an entry never reported changes nothing either: made, written and
                // removed in a directory before its walk listed it.)
                break
            case .rootRemoved, .rootMoved:
                problems.append("the watch ended: \(change)")
            default:
                problems.append("not asked for: \(change)")
            }
        }
        return problems
    }

    /// Every entry below `directory`: relative path to whether it is a directory (not following
    /// links).
    static func walk(_ directory: String) -> [String: Bool] {
        var found: [String: Bool] = [:]
        func visit(_ relative: String) {
            let path = relative.isEmpty ? directory : directory + "/" + relative
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
            for name in names {
                let child = relative.isEmpty ? name : relative + "/" + name
                var status = stat()
                guard lstat(directory + "/" + child, &status) == 0 else { continue }
                let isDirectory = status.st_mode & S_IFMT == S_IFDIR
                found[child] = isDirectory
                if isDirectory { visit(child) }
            }
        }
        visit("")
        return found
    }
}
