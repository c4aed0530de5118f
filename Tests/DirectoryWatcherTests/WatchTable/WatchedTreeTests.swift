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

/// glibc's `malloc_usable_size`, which the Glibc module does not export (it is `malloc.h`'s).
@_silgen_name("malloc_usable_size")
private func mallocUsableSize(_ pointer: UnsafeMutableRawPointer) -> Int
