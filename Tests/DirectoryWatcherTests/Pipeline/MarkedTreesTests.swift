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

    /// A backend that counts the lookups that reach it.
    private final class CountingMarks: FileSystemMarkBackend {
        let inner = FanotifyBackend(system: System())
        var lookups = 0
        var refusal: SyscallError? {
            get { inner.refusal }
            set { inner.refusal = newValue }
        }
        func openGroup() throws(SyscallError) { try inner.openGroup() }
        func mark(_ path: FileSystemPath, directory: Int32, id: [UInt8], selecting mask: UInt32) throws(SyscallError)
            -> Bool
        {
            try inner.mark(path, directory: directory, id: id, selecting: mask)
        }
        func unmark(_ id: [UInt8]) { inner.unmark(id) }
        func closeGroupIfUnused() { inner.closeGroupIfUnused() }
        func mountFD(for handle: KernelHandle) -> Int32? { inner.mountFD(for: handle) }
        func descriptor(_ handle: KernelHandle) -> Int32? {
            lookups += 1
            return inner.descriptor(handle)
        }
        func descriptor(for handle: KernelHandle) -> Int32 { inner.descriptor(for: handle) }
        func handle(_ wd: Int32) -> KernelHandle? { inner.handle(wd) }
        var allDescriptors: [(KernelHandle, Int32)] { inner.allDescriptors }
        func forget(_ wd: Int32) { inner.forget(wd) }
        func isOutside(_ handle: KernelHandle) -> Bool {
            lookups += 1
            return inner.isOutside(handle)
        }
        func markOutside(_ handle: KernelHandle) { inner.markOutside(handle) }
        func forgetOutside() { inner.forgetOutside() }
        func closeAll() { inner.closeAll() }
    }

    /// Records of the tree's directory and of one outside it, in turn (a build writing elsewhere
    /// on the file system while the tree changes): after the first of each, every answer comes
    /// from the cache, by the record's handle compared in place, and none reaches the backend.
    func testTwoDirectoriesInTurnAreAnsweredWithoutAskingTheBackend() {
        let counting = CountingMarks()
        var marked = MarkedTrees(backend: counting)
        let tree = handle(1)
        let build = handle(2)
        let wd = marked.descriptor(for: tree)
        XCTAssertEqual(marked.descriptor(tree), wd)
        XCTAssertFalse(marked.isOutside(build))
        marked.markOutside(build)
        let asked = counting.lookups
        let inTree = MarkEvent(mask: UInt64(EventMask.create), directory: tree, name: Array("a.swift".utf8))
        let outside = MarkEvent(mask: UInt64(EventMask.modify), directory: build, name: Array("build.log".utf8))
        for _ in 0..<5 {
            XCTAssertEqual(marked.last(namedBy: inTree), .some(wd))
            XCTAssertEqual(marked.last(namedBy: outside), .some(nil))
            XCTAssertEqual(marked.descriptor(tree), wd)
            XCTAssertTrue(marked.isOutside(build))
        }
        XCTAssertEqual(counting.lookups, asked, "a lookup reached the backend")
        // A third directory pushes out the one named longest ago.
        let third = handle(3)
        XCTAssertFalse(marked.isOutside(third))
        marked.markOutside(third)
        XCTAssertEqual(marked.last(namedBy: inTree), nil, "two are kept, not three")
        XCTAssertEqual(marked.last(namedBy: outside), .some(nil))
    }

    /// Whatever is done in whatever order, the cache answers as the backend does.
    func testTheCacheNeverAnswersDifferentlyFromTheBackend() {
        var marked = trees()
        let handles = (1...4).map { handle(UInt8($0)) }
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        for step in 0..<5_000 {
            let handle = handles[next(handles.count)]
            switch next(7) {
            case 0: _ = marked.descriptor(for: handle)
            case 1: if marked.backend.descriptor(handle) == nil { marked.markOutside(handle) }
            case 2: if next(4) == 0 { marked.forgetOutside() }
            case 3: if let wd = marked.backend.descriptor(handle), next(3) == 0 { marked.forget(wd) }
            case 4:
                let event = MarkEvent(mask: UInt64(EventMask.create), directory: handle, name: [0x61])
                if let cached = marked.last(namedBy: event) {
                    XCTAssertEqual(
                        cached, marked.backend.descriptor(handle), "step \(step): the cache's descriptor")
                    if cached == nil { XCTAssertTrue(marked.backend.isOutside(handle), "step \(step)") }
                }
            case 5: XCTAssertEqual(marked.descriptor(handle), marked.backend.descriptor(handle), "step \(step)")
            default:
                XCTAssertEqual(
                    marked.isOutside(handle),
                    marked.backend.isOutside(handle) && marked.backend.descriptor(handle) == nil,
                    "step \(step)")
            }
        }
    }
}
