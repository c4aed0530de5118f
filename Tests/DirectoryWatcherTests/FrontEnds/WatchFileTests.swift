import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// `watchFile`: one file, watched by name through its directory, so that it survives being
/// replaced. Checked through the barrier, like ChangeTests.
final class WatchFileTests: WatchedDirectoryTestCase {
    private var file: String!

    override func setUpWithError() throws {
        try super.setUpWithError()
        file = directory.touch("config.toml")
        try watch { try DirectoryWatcher.watchFile(path: file, delegate: $0) }
    }

    func testReportsTheFileAndNothingElseInItsDirectory() {
        XCTAssertEqual(watcher.path, FileSystemPath(file))
        directory.touch("sibling")
        directory.write("sibling", "x")
        directory.mkdir("folder")
        XCTAssertEqual(delivered(), [])
        directory.write("config.toml", "a = 1")
        chmod(file, 0o600)
        XCTAssertEqual(delivered(), [DirectoryChange(.modified, file), DirectoryChange(.attributesChanged, file)])
    }

    func testAnAtomicSaveIsARenameOntoTheNameAndTheWatchGoesOn() {
        let temporary = directory.touch("config.toml.tmp")
        directory.write("config.toml.tmp", "a = 2")
        XCTAssertEqual(delivered(), [], "the temporary file is not the watched file")
        rename(temporary, file)
        XCTAssertEqual(delivered(), [DirectoryChange(.renamed, file, from: temporary)])
        directory.write("config.toml", "a = 3")
        XCTAssertEqual(delivered(), [DirectoryChange(.modified, file)], "the new file is watched")
        XCTAssertTrue(watcher.isValid)
    }

    func testRemovedThenCreatedAgain() {
        unlink(file)
        XCTAssertEqual(delivered(), [DirectoryChange(.removed, file)])
        XCTAssertTrue(watcher.isValid)
        directory.touch("config.toml")
        directory.write("config.toml", "back")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, file), DirectoryChange(.modified, file)])
    }

    func testRenamedAwayThenTheNewNameIsNotWatched() {
        let moved = directory.url("config.old")
        rename(file, moved)
        XCTAssertEqual(delivered(), [DirectoryChange(.renamed, moved, from: file)])
        directory.write("config.old", "not ours")
        XCTAssertEqual(delivered(), [])
    }

    func testMovedOutAndBackIn() {
        let elsewhere = directory.mkdir("elsewhere") + "/config.toml"
        rename(file, elsewhere)
        XCTAssertEqual(delivered(), [DirectoryChange(.movedOut, file)])
        rename(elsewhere, file)
        XCTAssertEqual(delivered(), [DirectoryChange(.movedIn, file)])
    }

    func testTheFileNeedNotExistYet() throws {
        let later = directory.url("later.json")
        let laterRecorder = Recorder()
        let laterWatcher = try DirectoryWatcher.watchFile(path: later, delegate: laterRecorder)
        defer { laterWatcher.invalidate() }
        directory.touch("later.json")
        waitForDelivery(laterWatcher)
        XCTAssertEqual(laterRecorder.changes, [DirectoryChange(.created, later)])
    }

    func testTheDirectoryGoingAwayEndsTheWatch() {
        unlink(file)
        rmdir(directory.path)
        XCTAssertEqual(
            delivered(),
            [DirectoryChange(.removed, file), DirectoryChange(.rootRemoved, directory.path, directory: true)])
        XCTAssertFalse(watcher.isValid, "the watcher stopped itself with that batch")
    }

    func testASymbolicLinkIsFollowedAndChangesCarryTheGivenPath() throws {
        let link = directory.url("link.toml")
        XCTAssertEqual(symlink("config.toml", link), 0)
        let linkRecorder = Recorder()
        let linkWatcher = try DirectoryWatcher.watchFile(path: link, delegate: linkRecorder)
        defer { linkWatcher.invalidate() }
        directory.write("config.toml", "through the link")
        waitForDelivery(linkWatcher)
        XCTAssertEqual(linkRecorder.changes, [DirectoryChange(.modified, link)])
    }

    func testErrors() {
        XCTAssertThrowsError(try DirectoryWatcher.watchFile(path: "/no/such/dir/file", delegate: recorder)) {
            XCTAssertEqual(($0 as? DirectoryWatcherError)?.code, .noSuchPath)
        }
        XCTAssertThrowsError(try DirectoryWatcher.watchFile(path: file + "/inside", delegate: recorder)) {
            XCTAssertEqual(($0 as? DirectoryWatcherError)?.code, .notADirectory)
        }
        XCTAssertThrowsError(try DirectoryWatcher.watchFile(path: "/", delegate: recorder)) {
            XCTAssertEqual(($0 as? DirectoryWatcherError)?.code, .notAnEntry)
        }
        let loop = directory.url("loop")
        XCTAssertEqual(symlink("loop", loop), 0)
        XCTAssertThrowsError(try DirectoryWatcher.watchFile(path: loop, delegate: recorder)) {
            XCTAssertEqual(($0 as? DirectoryWatcherError)?.code, .symbolicLinkLoop)
        }
    }

    func testAFileWatchAndAFolderWatchOfOneDirectoryEachSeeTheirOwn() throws {
        let folderRecorder = Recorder()
        let folderWatcher = try DirectoryWatcher.watchFolder(path: directory.path, delegate: folderRecorder)
        defer { folderWatcher.invalidate() }
        let other = directory.touch("other")
        directory.write("config.toml", "x")
        waitForDelivery(folderWatcher)
        XCTAssertEqual(folderRecorder.changes, [DirectoryChange(.created, other), DirectoryChange(.modified, file)])
        XCTAssertEqual(delivered(), [DirectoryChange(.modified, file)])
        folderWatcher.invalidate()
        directory.write("config.toml", "y")
        XCTAssertEqual(delivered(), [DirectoryChange(.modified, file)], "the shared kernel watch stays")
    }

    func testClosureForm() throws {
        let seen = LockedValue<[DirectoryChange]>([])
        let closureWatcher = try DirectoryWatcher.watchFile(path: file) { changes in seen.update { $0 += changes } }
        defer { closureWatcher.invalidate() }
        directory.write("config.toml", "x")
        waitForDelivery(closureWatcher)
        XCTAssertEqual(seen.get(), [DirectoryChange(.modified, file)])
    }
}
