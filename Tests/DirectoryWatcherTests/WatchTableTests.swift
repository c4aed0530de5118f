import XCTest

@testable import DirectoryWatcher

/// The watch table against a fake kernel: descriptors per inode, masks, removal.
final class WatchTableTests: XCTestCase {
    private final class Subscriber {}

    func testSecondSubscriberJoinsTheKernelWatchWithTheUnionMask() throws {
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(inotifyFD: 99, system: kernel.system)
        let one = Subscriber()
        let two = Subscriber()
        let first = try table.add(one, directory: "/d", mask: InotifyMask.create)
        let second = try table.add(two, directory: "/d", mask: InotifyMask.delete)
        XCTAssertEqual(first, second)
        XCTAssertEqual(table.count, 1)
        XCTAssertEqual(table.kernelMask(first), InotifyMask.create | InotifyMask.delete)
        XCTAssertEqual(table.watches(first).map(\.mask), [InotifyMask.create, InotifyMask.delete])
        // IN_MASK_ADD makes the kernel OR the masks instead of replacing them.
        XCTAssertTrue(kernel.calls.get().allSatisfy { $0.hasPrefix("add /d") })
        XCTAssertTrue(
            kernel.calls.get().allSatisfy { UInt32($0.split(separator: " ")[2], radix: 16)! & InotifyMask.maskAdd != 0 }
        )
    }

    func testKernelWatchIsRemovedOnlyWithTheLastSubscriber() throws {
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(inotifyFD: 99, system: kernel.system)
        let one = Subscriber()
        let two = Subscriber()
        let wd = try table.add(one, directory: "/d", mask: InotifyMask.create)
        try table.add(two, directory: "/d", mask: InotifyMask.create)
        table.remove(one, from: wd)
        XCTAssertFalse(kernel.calls.get().contains("rm \(wd)"))
        XCTAssertEqual(table.watches(wd).count, 1)
        table.remove(two, from: wd)
        XCTAssertEqual(kernel.calls.get().last, "rm \(wd)")
        XCTAssertEqual(table.count, 0)
        table.remove(two, from: wd)  // again: nothing to do, no second rm
        XCTAssertEqual(kernel.calls.get().filter { $0.hasPrefix("rm") }.count, 1)
    }

    func testSameSubscriberTwiceKeepsOneWatch() throws {
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(inotifyFD: 99, system: kernel.system)
        let one = Subscriber()
        let wd = try table.add(one, directory: "/d", mask: InotifyMask.create)
        try table.add(one, directory: "/d", mask: InotifyMask.modify)
        XCTAssertEqual(table.watches(wd).count, 1)
        XCTAssertEqual(table.watches(wd).first?.mask, InotifyMask.create | InotifyMask.modify)
    }

    func testKernelDropForgetsTheDescriptorAndReturnsItsWatches() throws {
        let kernel = FakeKernel()
        var table = WatchTable<Subscriber>(inotifyFD: 99, system: kernel.system)
        let one = Subscriber()
        let wd = try table.add(one, directory: "/d", mask: InotifyMask.create)
        XCTAssertEqual(table.kernelDropped(wd).count, 1)
        XCTAssertEqual(table.count, 0)
        XCTAssertEqual(table.kernelDropped(wd).count, 0, "a second IN_IGNORED is harmless")
        XCTAssertEqual(table.watches(-1).count, 0, "the overflow descriptor is never in the table")
    }

    func testFileWatchMatchesItsEntryByNameBytes() throws {
        var table = WatchTable<Subscriber>(inotifyFD: 99, system: FakeKernel().system)
        let entry = WatchedEntry(name: Array("config".utf8), path: "/etc/app/config")
        let wd = try table.add(Subscriber(), directory: "/etc/app", mask: InotifyMask.modify, only: entry)
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
        var table = WatchTable<Subscriber>(inotifyFD: 99, system: System(calls))
        let descriptors: [Int32] = [1, 2, 3, 64, 128, 4096, 8192, 1 << 20, 1 << 24, Int32.max] + (5000..<5100)
        for wd in descriptors {
            XCTAssertEqual(
                try table.add(Subscriber(), directory: FileSystemPath("/d/\(wd)"), mask: InotifyMask.create), wd)
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
        var table = WatchTable<Subscriber>(
            inotifyFD: 99, system: System(.live.failing(\.inotifyAddWatch, errno: ENOENT)))
        XCTAssertThrowsError(try table.add(Subscriber(), directory: "/missing", mask: InotifyMask.create)) { error in
            XCTAssertEqual(error as? SyscallError, SyscallError(function: "inotify_add_watch", errno: ENOENT))
        }
        XCTAssertEqual(table.count, 0)
    }
}
