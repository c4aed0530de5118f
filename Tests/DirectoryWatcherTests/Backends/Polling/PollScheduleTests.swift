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
}
