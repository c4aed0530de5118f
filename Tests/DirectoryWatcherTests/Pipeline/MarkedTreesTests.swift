import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The router's side of a marking backend's table: the last handle a record named is kept with
/// its descriptor, or as outside every tree, so that a run of records from one directory costs a
/// comparison each. The cache must never answer differently from the backend it stands before.
/// No kernel: the backend's tables are plain memory (its group is never opened).
final class MarkedTreesTests: XCTestCase {
    private func handle(_ byte: UInt8) -> KernelHandle {
        KernelHandle(key: [1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 0, 0, byte, byte, byte, byte])
    }

    private func trees() -> MarkedTrees { MarkedTrees(backend: FanotifyBackend(system: System())) }

    func testADirectoryFoundOutsideStaysOutsideUntilOutsideIsForgotten() {
        var marked = trees()
        let build = handle(9)
        XCTAssertFalse(marked.isOutside(build), "not known yet: to be resolved")
        XCTAssertNil(marked.descriptor(build))
        marked.markOutside(build)
        for _ in 0..<3 {
            XCTAssertTrue(marked.isOutside(build))
            XCTAssertNil(marked.descriptor(build), "outside: no descriptor")
        }
        marked.forgetOutside()
        XCTAssertFalse(marked.isOutside(build), "a tree was added or a directory moved in: resolve again")
        XCTAssertFalse(marked.backend.isOutside(build))
    }

    func testADirectoryOutsideThatJoinsATreeGetsItsDescriptor() {
        var marked = trees()
        let moved = handle(4)
        marked.markOutside(moved)
        XCTAssertTrue(marked.isOutside(moved))
        let wd = marked.descriptor(for: moved)
        XCTAssertTrue(MarkedDescriptors.contains(wd))
        XCTAssertEqual(marked.descriptor(moved), wd, "the descriptor, not the outside it was cached as")
        XCTAssertFalse(marked.isOutside(moved))
        marked.forget(wd)
        XCTAssertNil(marked.descriptor(moved), "let go: not known")
    }

    func testHandlesOfOneLengthAndDifferentBytesAreTwoDirectories() {
        var marked = trees()
        let one = handle(1)
        let other = handle(2)
        let wd = marked.descriptor(for: one)
        XCTAssertEqual(marked.descriptor(one), wd)
        XCTAssertNil(marked.descriptor(other))
        marked.markOutside(other)
        XCTAssertEqual(marked.descriptor(one), wd, "the outside one in the cache does not hide the other")
        XCTAssertTrue(marked.isOutside(other))
        XCTAssertFalse(marked.isOutside(one))
        XCTAssertNotEqual(one, KernelHandle(key: one.key + [0]), "a longer key is another handle")
        XCTAssertEqual(one, KernelHandle(key: one.key))
        XCTAssertEqual(KernelHandle(key: []), KernelHandle(key: []))
    }
}
