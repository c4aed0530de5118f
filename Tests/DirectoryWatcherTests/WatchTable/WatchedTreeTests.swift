import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// A tree's nodes and their paths: cached for events, built without a cache for a listing of
/// every directory.
final class WatchedTreeTests: XCTestCase {
    private func chain() -> (WatchedTree, [TreeNode]) {
        let tree = WatchedTree(rootPath: "/t", wd: 1)
        var nodes = [tree.root]
        for (index, name) in ["a", "b", "c"].enumerated() {
            nodes.append(tree.add(Array(name.utf8), of: nodes[index], wd: Int32(index + 2)))
        }
        return (tree, nodes)
    }

    func testAnUncachedPathIsThePathAndLeavesNoneCached() {
        let (_, nodes) = chain()
        XCTAssertEqual(nodes[3].uncachedPath, "/t/a/b/c")
        XCTAssertFalse(nodes.dropFirst().contains { $0.hasCachedPath }, "nothing cached on the way up")
        XCTAssertEqual(nodes[3].path, "/t/a/b/c")
        XCTAssertTrue(nodes.dropFirst().allSatisfy { $0.hasCachedPath }, "the path caches its ancestors'")
    }

    func testAnUncachedPathFollowsARenameAboveIt() {
        let (tree, nodes) = chain()
        XCTAssertEqual(nodes[3].path, "/t/a/b/c")
        tree.move(nodes[1], to: Array("z".utf8), in: tree.root)
        XCTAssertFalse(nodes[3].hasCachedPath, "stale after a rename in the tree")
        XCTAssertEqual(nodes[3].uncachedPath, "/t/z/b/c")
        XCTAssertEqual(nodes[3].path, "/t/z/b/c")
    }

    /// A tree has a node for each of its directories: one fits glibc's 96-byte chunk, whose
    /// usable size is 88 (the next, 112, was a sixth more for every directory).
    func testATreeNodeFitsGlibcs96ByteChunk() {
        let (_, nodes) = chain()
        for node in nodes {
            XCTAssertLessThanOrEqual(mallocUsableSize(Unmanaged.passUnretained(node).toOpaque()), 88)
        }
    }

    /// A name of up to 15 bytes is kept in the node, a longer one beside it; either is found,
    /// compared and built into paths the same, through renames from one kind to the other.
    func testNamesShortAndLongAreFoundAndBuiltIntoPaths() {
        let tree = WatchedTree(rootPath: "/t", wd: 1)
        let names = [
            "", "a", "1234567", "12345678", "123456789", "fifteen-bytes-x", "sixteen-bytes-xy",
            String(repeating: "é", count: 100),
        ]
        .dropFirst().map { Array($0.utf8) }
        var made: [TreeNode] = []
        for (index, name) in names.enumerated() {
            made.append(tree.add(name, of: tree.root, wd: Int32(index + 2)))
        }
        for (node, name) in zip(made, names) {
            XCTAssertEqual(node.name, name)
            XCTAssertEqual(Array(node.nameBytes), name)
            XCTAssertTrue(node.hasName(name[...]))
            XCTAssertTrue(tree.root.child(name[...]) === node)
            XCTAssertEqual(node.path, FileSystemPath(bytes: Array("/t/".utf8) + name))
            for other in made where other !== node {
                XCTAssertFalse(node.hasName(other.name[...]))
            }
            XCTAssertFalse(node.hasName(name.dropLast()), "a prefix is another name")
            XCTAssertFalse(node.hasName((name + [0x2F])[...]), "so is a longer one")
        }
        // Long to short and back, with the flag beside the name kept.
        let node = made.last!
        node.contentsOwed = true
        tree.move(node, to: Array("short".utf8), in: tree.root)
        XCTAssertEqual(node.name, Array("short".utf8))
        XCTAssertTrue(tree.root.child(Array("short".utf8)[...]) === node)
        XCTAssertTrue(node.contentsOwed)
        XCTAssertFalse(node.isRoot)
        tree.move(node, to: names[5], in: made[0])
        XCTAssertEqual(node.path, FileSystemPath(bytes: Array("/t/a/".utf8) + names[5]))
        XCTAssertNil(tree.root.child(Array("short".utf8)[...]))
        XCTAssertTrue(node.contentsOwed)
        node.contentsOwed = false
        XCTAssertFalse(node.contentsOwed)
        XCTAssertEqual(node.name, names[5])
    }

    /// A node keeps the lower half of the epoch its path was cached under: when the count wraps,
    /// every cached path is forgotten, so one cached 2^32 renames ago is not taken as fresh.
    func testACachedPathIsStaleAcrossTheEpochsWrap() {
        let (tree, nodes) = chain()
        XCTAssertEqual(nodes[3].path, "/t/a/b/c")
        let cachedAt = tree.epoch
        tree.pretendRenames(cachedAt + (1 << 32) - 1)
        XCTAssertFalse(nodes[3].hasCachedPath)
        // The next rename wraps the lower half back to where nodes[3] cached its path.
        tree.move(nodes[1], to: Array("z".utf8), in: tree.root)
        XCTAssertEqual(UInt32(truncatingIfNeeded: tree.epoch), UInt32(truncatingIfNeeded: cachedAt))
        XCTAssertFalse(nodes[3].hasCachedPath, "forgotten at the wrap")
        XCTAssertEqual(nodes[3].path, "/t/z/b/c")
        XCTAssertEqual(tree.root.path, "/t", "the root keeps its own")
    }

    /// The fields few directories need are made on first use, and read as they were set.
    func testARareFieldReadsWhatWasSetAndItsDefaultOtherwise() {
        let (_, nodes) = chain()
        let node = nodes[2]
        XCTAssertEqual(node.refused, [])
        XCTAssertEqual(node.metEarlyIn, -1)
        node.refused.insert(Array("locked".utf8))
        node.metEarlyIn = 7
        XCTAssertEqual(node.refused, [Array("locked".utf8)])
        XCTAssertEqual(node.metEarlyIn, 7)
        XCTAssertEqual(nodes[1].refused, [], "another node's own")
        XCTAssertEqual(nodes[1].metEarlyIn, -1)
        node.refused.remove(Array("locked".utf8))
        node.metEarlyIn = -1
        XCTAssertEqual(node.refused, [])
        XCTAssertEqual(node.metEarlyIn, -1)
    }

    /// The root's path is the one it was given, through renames and moves below it.
    func testTheRootsPathStaysTheOneItWasGiven() {
        let (tree, nodes) = chain()
        XCTAssertTrue(tree.root.isRoot)
        XCTAssertFalse(nodes.dropFirst().contains { $0.isRoot })
        tree.move(nodes[2], to: Array("y".utf8), in: tree.root)
        XCTAssertEqual(tree.root.path, "/t")
        XCTAssertEqual(tree.root.uncachedPath, "/t")
        XCTAssertTrue(tree.root.hasCachedPath)
        XCTAssertEqual(nodes[3].path, "/t/y/c")
    }
}

extension WatchedTreeTests {
    /// A directory's subdirectories, in an array while few and in a dictionary past
    /// `mostInArray`: found, replaced and removed by name either way, each listed once.
    func testADirectorysSubdirectoriesAreFoundByNameFewOrMany() {
        let tree = WatchedTree(rootPath: "/t", wd: 1)
        let count = 2 * TreeChildren.mostInArray + 7
        var made: [TreeNode] = []
        for index in 0..<count {
            // One name a prefix of others ("d1", "d10").
            made.append(tree.add(Array("d\((index * 7) % count)".utf8), of: tree.root, wd: Int32(index + 2)))
            XCTAssertEqual(tree.root.children.count, index + 1)
            XCTAssertTrue(made.allSatisfy { tree.root.child($0.name[...]) === $0 }, "after \(index + 1)")
        }
        XCTAssertEqual(Set(tree.root.children.map(\.wd)), Set(made.map(\.wd)), "each listed once")
        XCTAssertNil(tree.root.child(Array("d".utf8)[...]))
        // A rename in place, then a move out: found by the new name only, then gone.
        let oldName = made[3].name
        tree.move(made[3], to: Array("renamed".utf8), in: tree.root)
        XCTAssertNil(tree.root.child(oldName[...]))
        XCTAssertTrue(tree.root.child(Array("renamed".utf8)[...]) === made[3])
        let movedName = made[4].name
        tree.move(made[4], to: Array("below".utf8), in: made[0])
        XCTAssertNil(tree.root.child(movedName[...]))
        XCTAssertTrue(made[0].child(Array("below".utf8)[...]) === made[4])
        XCTAssertEqual(tree.root.children.count, count - 1)
        // Removed one by one, down to none.
        for node in made where node !== made[4] {
            XCTAssertFalse(tree.remove(node).isEmpty)
            XCTAssertNil(tree.root.child(node.name[...]))
        }
        XCTAssertTrue(tree.root.children.isEmpty)
        XCTAssertNil(tree.root.children.any)
    }

    /// A copy of a directory's many children keeps what it had when the directory changes.
    func testACopyOfManyChildrenKeepsWhatItHad() {
        let tree = WatchedTree(rootPath: "/t", wd: 1)
        for index in 0...TreeChildren.mostInArray {
            tree.add(Array("d\(index)".utf8), of: tree.root, wd: Int32(index + 2))
        }
        let copy = tree.root.children
        let first = tree.root.child(Array("d0".utf8)[...])!
        _ = tree.remove(first)
        XCTAssertNil(tree.root.child(Array("d0".utf8)[...]))
        XCTAssertTrue(copy[Array("d0".utf8)[...]] === first)
        XCTAssertEqual(copy.count, TreeChildren.mostInArray + 1)
    }

    /// A name given to another directory replaces the one it held, few or many.
    func testANameTakenByAnotherDirectoryHoldsOnlyThatOne() {
        for before in [1, TreeChildren.mostInArray + 1] {
            let tree = WatchedTree(rootPath: "/t", wd: 1)
            for index in 0..<before { tree.add(Array("d\(index)".utf8), of: tree.root, wd: Int32(index + 2)) }
            let replacement = tree.add(Array("d0".utf8), of: tree.root, wd: 100)
            XCTAssertTrue(tree.root.child(Array("d0".utf8)[...]) === replacement, "\(before) before")
            XCTAssertEqual(tree.root.children.count, before)
        }
    }
}

/// glibc's `malloc_usable_size`, which the Glibc module does not export (it is `malloc.h`'s).
@_silgen_name("malloc_usable_size")
private func mallocUsableSize(_ pointer: UnsafeMutableRawPointer) -> Int
