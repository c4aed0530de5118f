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
}
