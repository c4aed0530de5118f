import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The watch table against a fake kernel: descriptors per inode, masks, removal.
final class WatchTableTests: XCTestCase {
    private final class Subscriber {}

    func testSecondSubscriberJoinsTheKernelWatchWithTheUnionMask() throws {
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(
            backend: InotifyBackend(fd: 99, system: kernel.system), system: kernel.system)
        let one = Subscriber()
        let two = Subscriber()
        let first = try table.add(one, directory: "/d", mask: EventMask.create)
        let second = try table.add(two, directory: "/d", mask: EventMask.delete)
        XCTAssertEqual(first, second)
        XCTAssertEqual(table.count, 1)
        XCTAssertEqual(table.kernelMask(first), EventMask.create | EventMask.delete)
        XCTAssertEqual(table.watches(first).map(\.mask), [EventMask.create, EventMask.delete])
        // IN_MASK_ADD makes the kernel OR the masks instead of replacing them.
        XCTAssertTrue(kernel.calls.get().allSatisfy { $0.hasPrefix("add /d") })
        XCTAssertTrue(
            kernel.calls.get().allSatisfy {
                UInt32($0.split(separator: " ")[2], radix: 16)! & InotifyFlags.maskAdd != 0
            }
        )
    }

    /// The table says when the last subscriber left; letting the backend's watch go is then the
    /// router's (the table does not know which backend numbered it).
    /// The kernel's mask is never narrowed: a subscriber that left leaves its bits in the
    /// kernel watch's mask (the router expects the echo of its own listing by it) until the
    /// descriptor goes.
    func testTheKernelMaskKeepsTheBitsOfASubscriberThatLeft() throws {
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(
            backend: InotifyBackend(fd: 99, system: kernel.system), system: kernel.system)
        let one = Subscriber()
        let two = Subscriber()
        let wd = try table.add(one, directory: "/d", mask: EventMask.create | EventMask.open)
        try table.add(two, directory: "/d", mask: EventMask.delete)
        XCTAssertFalse(table.remove(one, from: wd))
        XCTAssertEqual(table.watches(wd).map(\.mask), [EventMask.delete])
        XCTAssertEqual(table.kernelMask(wd), EventMask.create | EventMask.open | EventMask.delete)
        try table.add(one, directory: "/d", mask: EventMask.modify)
        XCTAssertEqual(
            table.kernelMask(wd), EventMask.create | EventMask.open | EventMask.delete | EventMask.modify)
        XCTAssertFalse(table.remove(two, from: wd))
        XCTAssertTrue(table.remove(one, from: wd))
        XCTAssertNil(table.kernelMask(wd))
        // Watched again under the same number (a fake kernel's): nothing left from before.
        let again = try table.add(one, directory: "/d", mask: EventMask.create)
        XCTAssertEqual(table.kernelMask(again), EventMask.create)
    }

    func testTheLastSubscriberLeavingIsSaidOnce() throws {
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(
            backend: InotifyBackend(fd: 99, system: kernel.system), system: kernel.system)
        let one = Subscriber()
        let two = Subscriber()
        let wd = try table.add(one, directory: "/d", mask: EventMask.create)
        try table.add(two, directory: "/d", mask: EventMask.create)
        XCTAssertFalse(table.remove(one, from: wd))
        XCTAssertEqual(table.watches(wd).count, 1)
        XCTAssertTrue(table.remove(two, from: wd))
        XCTAssertEqual(table.count, 0)
        XCTAssertFalse(table.remove(two, from: wd), "again: nothing to do")
        XCTAssertFalse(kernel.calls.get().contains { $0.hasPrefix("rm") }, "no system call of its own")
    }

    func testSameSubscriberTwiceKeepsOneWatch() throws {
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(
            backend: InotifyBackend(fd: 99, system: kernel.system), system: kernel.system)
        let one = Subscriber()
        let wd = try table.add(one, directory: "/d", mask: EventMask.create)
        try table.add(one, directory: "/d", mask: EventMask.modify)
        XCTAssertEqual(table.watches(wd).count, 1)
        XCTAssertEqual(table.watches(wd).first?.mask, EventMask.create | EventMask.modify)
    }

    /// A watch's fields live in one object its copies share: a copy taken before its mask was
    /// widened keeps the mask it had, and keeps its entry and path.
    func testAWatchCopiedBeforeItsMaskWidensKeepsItsOwn() throws {
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(
            backend: InotifyBackend(fd: 99, system: kernel.system), system: kernel.system)
        let one = Subscriber()
        let entry = WatchedEntry(name: Array("f".utf8), path: "/d/f")
        let wd = try table.add(one, directory: "/d", mask: EventMask.create, only: entry)
        let before = table.watches(wd)
        try table.add(one, directory: "/d", mask: EventMask.modify, only: entry)
        XCTAssertEqual(before.first?.mask, EventMask.create)
        XCTAssertEqual(table.watches(wd).first?.mask, EventMask.create | EventMask.modify)
        for watch in Array(before) + table.watches(wd) {
            XCTAssertTrue(watch.subscriber === one)
            XCTAssertEqual(watch.entry, entry)
            XCTAssertEqual(watch.directory, "/d")
            XCTAssertNil(watch.node)
        }
    }

    /// A tree's directories share their subscriber's fields (an object each was a sixth of a
    /// tree's memory): each still goes by its own node's path, one whose mask widens gets fields of
    /// its own, and another subscriber of the same directory keeps its own.
    func testATreesDirectoriesShareTheirFieldsAndEachKeepsItsOwnNode() throws {
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(
            backend: InotifyBackend(fd: 99, system: kernel.system), system: kernel.system)
        let tree = Subscriber()
        let other = Subscriber()
        var made: WatchedTree?
        let rootWD = try table.add(tree, directory: "/t", mask: EventMask.create) { wd in
            made = WatchedTree(rootPath: "/t", wd: wd)
            return made?.root
        }
        let nodes = try XCTUnwrap(made)
        var children: [(wd: Int32, node: TreeNode)] = []
        for name in ["a", "b", "c"] {
            let wd = try table.add(tree, directory: FileSystemPath("/t/\(name)"), mask: EventMask.create) {
                nodes.add(Array(name.utf8), of: nodes.root, wd: $0)
            }
            children.append((wd, try XCTUnwrap(nodes.node(wd))))
        }
        try table.add(other, directory: "/t/b", mask: EventMask.delete)
        try table.add(tree, directory: "/t/c", mask: EventMask.modify) { nodes.node($0) }
        for (wd, node) in children {
            let watch = try XCTUnwrap(table.watches(wd).first)
            XCTAssertTrue(watch.subscriber === tree)
            XCTAssertTrue(watch.node === node)
            XCTAssertEqual(watch.directory, node.path)
            XCTAssertNil(watch.entry)
        }
        let watches = try children.map { try XCTUnwrap(table.watches($0.wd).first) }
        let root = try XCTUnwrap(table.watches(rootWD).first)
        XCTAssertTrue(watches[0].sharesFields(with: root) && watches[1].sharesFields(with: root))
        XCTAssertFalse(watches[2].sharesFields(with: root), "c's mask widened: fields of its own")
        XCTAssertEqual(
            children.map { table.watches($0.wd).first?.mask },
            [EventMask.create, EventMask.create, EventMask.create | EventMask.modify], "c's widened alone")
        XCTAssertEqual(table.watches(children[1].wd).map(\.mask), [EventMask.create, EventMask.delete])
        XCTAssertTrue(table.watches(children[1].wd).last?.subscriber === other)
        XCTAssertNil(table.watches(children[1].wd).last?.node)
        XCTAssertEqual(table.watches(children[1].wd).last?.directory, "/t/b")
        // The first of two leaving leaves the second.
        XCTAssertFalse(table.remove(tree, from: children[1].wd))
        XCTAssertEqual(table.watches(children[1].wd).map { ObjectIdentifier($0.subscriber) }, [ObjectIdentifier(other)])
    }

    func testKernelDropForgetsTheDescriptorAndReturnsItsWatches() throws {
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(
            backend: InotifyBackend(fd: 99, system: kernel.system), system: kernel.system)
        let one = Subscriber()
        let wd = try table.add(one, directory: "/d", mask: EventMask.create)
        XCTAssertEqual(table.kernelDropped(wd).count, 1)
        XCTAssertEqual(table.count, 0)
        XCTAssertEqual(table.kernelDropped(wd).count, 0, "a second IN_IGNORED is harmless")
        XCTAssertEqual(table.watches(-1).count, 0, "the overflow descriptor is never in the table")
    }

    func testFileWatchMatchesItsEntryByNameBytes() throws {
        let system = FakeKernel().system
        var table = WatchTable<Subscriber>(backend: InotifyBackend(fd: 99, system: system), system: system)
        let entry = WatchedEntry(name: Array("config".utf8), path: "/etc/app/config")
        let wd = try table.add(Subscriber(), directory: "/etc/app", mask: EventMask.modify, only: entry)
        let watch = try XCTUnwrap(table.watches(wd).first)
        // Names arrive as slices of the read buffer, at any offset in it.
        let read = Array("xxconfigconfig.tmp".utf8)
        XCTAssertTrue(watch.covers(read[2..<8]))
        XCTAssertFalse(watch.covers(read[8...]))
        XCTAssertEqual(watch.path(of: read[2..<8]), "/etc/app/config")
        XCTAssertEqual(watch.path(of: read[8...]), "/etc/app/config.tmp")
    }

    func testAnyDescriptorFindsItsOwnWatches() throws {
        // Descriptors hash to themselves: sparse ones, large ones and ones that share their low
        // bits (all in one bucket) must still find their own watches and no other's.
        var calls = SystemCalls.live
        calls.inotifyAddWatch = { _, path, _ in Int32(String(cString: path).dropFirst(3))! }
        calls.inotifyRmWatch = { _, _ in 0 }
        var table = WatchTable<Subscriber>(
            backend: InotifyBackend(fd: 99, system: System(calls)), system: System(calls))
        let descriptors: [Int32] = [1, 2, 3, 64, 128, 4096, 8192, 1 << 20, 1 << 24, Int32.max] + (5000..<5100)
        for wd in descriptors {
            XCTAssertEqual(
                try table.add(Subscriber(), directory: FileSystemPath("/d/\(wd)"), mask: EventMask.create), wd)
        }
        for wd in descriptors {
            XCTAssertEqual(table.watches(wd).map(\.directory), [FileSystemPath("/d/\(wd)")])
        }
        XCTAssertTrue(table.watches(4).isEmpty)
        XCTAssertTrue(table.watches(-1).isEmpty)
        XCTAssertEqual(table.kernelDropped(8192).count, 1)
        XCTAssertTrue(table.watches(8192).isEmpty)
        XCTAssertEqual(table.watches(4096).map(\.directory), ["/d/4096"])
        XCTAssertEqual(table.count, descriptors.count - 1)
    }

    func testFailedAddLeavesTheTableAlone() {
        let system = System(.live.failing(\.inotifyAddWatch, errno: ENOENT))
        var table = WatchTable<Subscriber>(backend: InotifyBackend(fd: 99, system: system), system: system)
        XCTAssertThrowsError(try table.add(Subscriber(), directory: "/missing", mask: EventMask.create)) { error in
            XCTAssertEqual(error as? SyscallError, SyscallError(function: "inotify_add_watch", errno: ENOENT))
        }
        XCTAssertEqual(table.count, 0)
    }

    /// A directory's watches, one inline or several in an array, through three subscribers
    /// joining and leaving in turn: each sees its own mask, and the entry stays 24 bytes.
    func testADirectorysWatchesGrowAndShrinkInOrder() throws {
        XCTAssertEqual(MemoryLayout<WatchTable<Subscriber>.Entry?>.stride, 16, "a table slot of a tree's directory")
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(
            backend: InotifyBackend(fd: 99, system: kernel.system), system: kernel.system)
        let subscribers = [Subscriber(), Subscriber(), Subscriber()]
        let masks = [EventMask.create, EventMask.delete, EventMask.modify]
        var wd: Int32 = -1
        for (subscriber, mask) in zip(subscribers, masks) {
            wd = try table.add(subscriber, directory: "/d", mask: mask)
        }
        XCTAssertEqual(table.watches(wd).map(\.mask), masks)
        XCTAssertTrue(zip(table.watches(wd), subscribers).allSatisfy { $0.subscriber === $1 })
        // Widened in place: the second watch of three, then the first.
        try table.add(subscribers[1], directory: "/d", mask: EventMask.attributes)
        XCTAssertEqual(table.watches(wd).map(\.mask), [masks[0], masks[1] | EventMask.attributes, masks[2]])
        XCTAssertFalse(table.remove(subscribers[1], from: wd))
        XCTAssertEqual(table.watches(wd).map(\.mask), [masks[0], masks[2]])
        XCTAssertFalse(table.remove(subscribers[0], from: wd))
        XCTAssertEqual(table.watches(wd).map(\.mask), [masks[2]], "one left, kept inline")
        try table.add(subscribers[2], directory: "/d", mask: EventMask.attributes)
        XCTAssertEqual(table.watches(wd).map(\.mask), [masks[2] | EventMask.attributes])
        XCTAssertTrue(table.remove(subscribers[2], from: wd))
        XCTAssertTrue(table.watches(wd).isEmpty)
        XCTAssertEqual(table.count, 0)
    }
}
