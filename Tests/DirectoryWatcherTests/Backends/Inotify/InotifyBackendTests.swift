import Glibc
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The inotify backend: its records are handed over as they are read, so the router's event bits
/// must be inotify's; and what each watch asks the kernel for.
final class InotifyBackendTests: XCTestCase {
    func testTheRoutersEventBitsAreInotifys() {
        let pairs: [(UInt32, Int32)] = [
            (EventMask.access, IN_ACCESS), (EventMask.modify, IN_MODIFY), (EventMask.attributes, IN_ATTRIB),
            (EventMask.closeWrite, IN_CLOSE_WRITE), (EventMask.closeNoWrite, IN_CLOSE_NOWRITE),
            (EventMask.open, IN_OPEN), (EventMask.movedFrom, IN_MOVED_FROM), (EventMask.movedTo, IN_MOVED_TO),
            (EventMask.create, IN_CREATE), (EventMask.delete, IN_DELETE), (EventMask.deleteSelf, IN_DELETE_SELF),
            (EventMask.moveSelf, IN_MOVE_SELF), (EventMask.unmount, IN_UNMOUNT),
            (EventMask.queueOverflow, IN_Q_OVERFLOW), (EventMask.ignored, IN_IGNORED),
        ]
        for (bit, kernel) in pairs { XCTAssertEqual(bit, UInt32(kernel)) }
        XCTAssertEqual(EventMask.isDirectory, UInt32(IN_ISDIR))
    }

    /// The mask of each `inotify_add_watch` the fake kernel saw, by path.
    private func masks(_ kernel: FakeKernel) -> [(String, UInt32)] {
        kernel.calls.get().compactMap { call in
            let parts = call.split(separator: " ")
            guard parts.first == "add", parts.count == 3, let mask = UInt32(parts[2], radix: 16) else { return nil }
            return (String(parts[1]), mask)
        }
    }

    func testADirectoryWatchAsksForADirectoryAddsToTheMaskAndLeavesUnlinkedEntriesOut() throws {
        let kernel = FakeKernel()
        let backend = InotifyBackend(fd: 99, system: kernel.system)
        _ = try backend.watch("/d", events: EventMask.create, followingLinks: true)
        _ = try backend.watch("/e", events: EventMask.create, followingLinks: false)
        _ = try backend.watch(openDirectory: 7, events: EventMask.delete)
        let seen = masks(kernel)
        XCTAssertEqual(seen.map(\.0), ["/d", "/e", "/proc/self/fd/7"])
        for (_, mask) in seen {
            XCTAssertEqual(mask & InotifyFlags.directoryWatch, InotifyFlags.directoryWatch)
        }
        XCTAssertEqual(seen.map { $0.1 & InotifyFlags.dontFollow != 0 }, [false, true, false])
        XCTAssertEqual(
            seen.map { $0.1 & ~(InotifyFlags.directoryWatch | InotifyFlags.dontFollow) },
            [
                EventMask.create, EventMask.create, EventMask.delete,
            ])
        backend.unwatch(3)
        XCTAssertEqual(kernel.calls.get().last, "rm 3")
    }
}
