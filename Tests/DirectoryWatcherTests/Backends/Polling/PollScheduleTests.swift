import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The pure parts: the schedule and the mount table.
final class PollScheduleTests: XCTestCase {
    func testTheWaitShortensAfterAChangeAndGrowsBackWhileQuiet() {
        var schedule = PollSchedule(interval: 1_000, now: 0)
        XCTAssertEqual(schedule.due, 1_000)
        schedule.polled(at: 1_000, foundChanges: false)
        XCTAssertEqual(schedule.due, 2_000, "quiet: the interval")
        schedule = PollSchedule(interval: 4_000_000_000, now: 0)
        schedule.polled(at: 0, foundChanges: true)
        XCTAssertEqual(schedule.wait, 1_000_000_000, "a quarter after a change")
        schedule.polled(at: 0, foundChanges: false)
        XCTAssertEqual(schedule.wait, 2_000_000_000, "doubled while quiet")
        schedule.polled(at: 0, foundChanges: false)
        XCTAssertEqual(schedule.wait, 4_000_000_000)
        schedule.polled(at: 0, foundChanges: false)
        XCTAssertEqual(schedule.wait, 4_000_000_000, "never past the interval")
        let short = PollSchedule(interval: 20_000_000, now: 0)
        XCTAssertEqual(short.shortest, 10_000_000, "never under 10 ms")
    }

    func testTheMountThatHoldsAPathIsTheLongestPrefix() {
        let table = """
            22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
            30 22 0:40 / /mnt rw - tmpfs tmpfs rw
            31 30 0:41 / /mnt/share rw - nfs4 server:/export rw
            32 30 0:42 / /mnt/shared\\040space rw - fuse.sshfs me@host: rw
            33 30 0:43 / /mnt/plain rw - fuse prog rw
            """
        XCTAssertEqual(MountTable.type(of: FileSystemPath("/mnt/share/a/b"), in: table), "nfs4")
        XCTAssertEqual(MountTable.type(of: FileSystemPath("/mnt/sharex"), in: table), "tmpfs", "component-wise")
        XCTAssertEqual(MountTable.type(of: FileSystemPath("/mnt/shared space/x"), in: table), "fuse.sshfs")
        XCTAssertEqual(MountTable.type(of: FileSystemPath("/mnt/plain"), in: table), "fuse", "no subtype: unknown")
        XCTAssertEqual(MountTable.type(of: FileSystemPath("/home"), in: table), "ext4")
    }

    /// A mount point is a path's bytes: one that is not UTF-8, with an escaped space and a
    /// backslash, is found as it is on disk (a decoded table would have replaced its byte).
    func testAMountPointThatIsNotUTF8IsReadAsItsBytes() {
        let point: [UInt8] = Array("/mnt/caf".utf8) + [0xE9] + Array(" x\\y".utf8)
        let table: [UInt8] =
            Array("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n40 22 0:50 / /mnt/caf".utf8) + [0xE9]
            + Array("\\040x\\134y rw - nfs4 server:/e rw\n".utf8)
        XCTAssertEqual(MountTable.type(of: FileSystemPath(bytes: point + Array("/a".utf8)), in: table), "nfs4")
        XCTAssertEqual(
            MountTable.type(of: FileSystemPath(bytes: Array("/mnt/caf".utf8) + [0xC3, 0xA9]), in: table), "ext4")
        XCTAssertEqual(
            MountTable.mounts(in: table).map(\.mountPoint), [FileSystemPath("/"), FileSystemPath(bytes: point)])
        XCTAssertEqual(MountTable.unescape(Array("a\\04".utf8)[...]), Array("a\\04".utf8), "cut short: as it is")
        XCTAssertEqual(MountTable.unescape(Array("\\999".utf8)[...]), Array("\\999".utf8), "no octal digits: as it is")
    }
}
