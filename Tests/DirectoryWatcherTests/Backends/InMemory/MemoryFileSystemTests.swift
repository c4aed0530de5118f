import Glibc
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher
@testable import DirectoryWatcherTesting

/// The in-memory file system the in-memory backend runs on: its events are the kernel's, in the
/// kernel's order, and its listings (records written by hand into the caller's buffer) parse as
/// the kernel's do.
final class MemoryFileSystemTests: XCTestCase {
    private let files = MemoryFileSystem()

    private func watch(_ path: String, _ mask: UInt32 = 0xfff) throws -> Int32 {
        try files.watch(FileSystemPath(path), events: mask, followingLinks: true)
    }

    func testAChangeInADirectoryNotWatchedIsSilentAndAWatchedOneQueuesTheKernelsEvents() throws {
        files.mkdirs("/a/b")
        let a = try watch("/a", UInt32(IN_CREATE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE))
        files.create("/a/b/unseen")
        XCTAssertEqual(files.queued, 0)
        files.create("/a/f")
        files.rename("/a/f", to: "/a/g")
        files.rename("/a/b", to: "/elsewhere")
        let events = files.read()
        XCTAssertEqual(
            events.map(\.mask),
            [
                UInt32(IN_CREATE), UInt32(IN_MOVED_FROM), UInt32(IN_MOVED_TO), UInt32(IN_MOVED_FROM | IN_ISDIR),
            ])
        XCTAssertEqual(events.map(\.wd), [a, a, a, a])
        XCTAssertEqual(events[1].cookie, events[2].cookie, "a rename's halves share a cookie")
        XCTAssertNotEqual(events[1].cookie, events[3].cookie)
        XCTAssertEqual(events.map { String(decoding: $0.name, as: UTF8.self) }, ["f", "f", "g", "b"])
    }

    func testARemovedWatchedDirectoryEndsItsWatchAsTheKernelDoes() throws {
        files.mkdirs("/a/b")
        let a = try watch("/a")
        let b = try watch("/a/b")
        XCTAssertEqual(try watch("/a/b"), b, "one watch per directory")
        files.remove("/a/b")
        let events = files.read().map { ($0.wd, $0.mask) }
        XCTAssertEqual(events.map(\.0), [b, b, a])
        XCTAssertEqual(events.map(\.1), [UInt32(IN_DELETE_SELF), UInt32(IN_IGNORED), UInt32(IN_DELETE | IN_ISDIR)])
        XCTAssertEqual(files.watchedPaths, ["/a"])
    }

    func testAFullQueueTakesOneOverflowAndDropsTheRest() throws {
        files.mkdirs("/a")
        _ = try watch("/a", UInt32(IN_CREATE))
        files.queueCapacity = 2
        for index in 0..<5 { files.create("/a/f\(index)") }
        let events = files.read()
        XCTAssertEqual(events.count, 3)
        XCTAssertTrue(events[2].isOverflow)
        files.create("/a/after")
        XCTAssertEqual(files.read().count, 1, "read: room again")
    }

    func testAWatchOfWhatIsNotADirectoryFailsAsTheKernelsDoes() {
        files.mkdirs("/a")
        files.create("/a/f")
        XCTAssertThrowsError(try watch("/nothing", UInt32(IN_CREATE | IN_ONLYDIR))) {
            XCTAssertEqual(($0 as? SyscallError)?.errno, ENOENT)
        }
        XCTAssertThrowsError(try watch("/a/f", UInt32(IN_CREATE | IN_ONLYDIR))) {
            XCTAssertEqual(($0 as? SyscallError)?.errno, ENOTDIR)
        }
        files.watchLimit = 1
        XCTAssertNoThrow(try watch("/a"))
        files.mkdirs("/b")
        XCTAssertThrowsError(try watch("/b")) { XCTAssertEqual(($0 as? SyscallError)?.errno, ENOSPC) }
    }

    /// Names long enough that a listing takes several reads of the library's 32 KiB buffer.
    func testAListingLargerThanOneReadIsListedWhole() throws {
        files.mkdirs("/big")
        let names = (0..<150).map { "\($0)" + String(repeating: "n", count: 240) }
        for name in names { files.create("/big/" + name) }
        files.mkdir("/big/sub")
        let snapshot = try Snapshot.read("/big", system: files.system)
        XCTAssertEqual(snapshot.entries.count, 151)
        XCTAssertEqual(snapshot.entries[Array("sub".utf8)]?.kind, .directory)
        var kinds: [EntryStatus.Kind] = []
        try Snapshot.readNames("/big", system: files.system) { _, _, kind in kinds.append(kind) }
        XCTAssertEqual(kinds.filter { $0 == .file }.count, 150)
        XCTAssertEqual(files.openDescriptors, 0)
    }

    /// A tree keeps each directory's name from its parent's listing: a name copied from the
    /// listing must hold its own bytes, not the listing's scratch buffer (which made each kept
    /// name cost 256 bytes and each listed name an extra copy).
    func testANameKeptFromAListingHoldsOnlyItsOwnBytes() throws {
        files.mkdirs("/d")
        let long = String(repeating: "l", count: 300)
        for name in ["a", "four", String(repeating: "m", count: 255), long] { files.create("/d/" + name) }
        var kept: [[UInt8]] = []
        try Snapshot.readNames("/d", system: files.system) { name, _, _ in kept.append(Array(name)) }
        XCTAssertEqual(Set(kept.map { String(decoding: $0, as: UTF8.self) }).count, 4)
        for name in kept {
            XCTAssertLessThan(name.capacity, name.count + 32, "a name of \(name.count) bytes kept in \(name.capacity)")
        }
    }

    func testOnlyTheCallsItServesReachIt() {
        XCTAssertThrowsError(try files.system.inotifyInit()) { XCTAssertEqual(($0 as? SyscallError)?.errno, ENOSYS) }
        XCTAssertThrowsError(try files.system.eventFD()) { XCTAssertEqual(($0 as? SyscallError)?.errno, ENOSYS) }
    }
}
