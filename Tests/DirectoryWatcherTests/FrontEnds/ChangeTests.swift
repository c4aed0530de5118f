import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// What a watcher reports for each kind of operation, checked through the barrier: every
/// assertion sees exactly the changes made before it, never more and never fewer.
final class ChangeTests: WatchedDirectoryTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try watch { try DirectoryWatcher.watchFolder(path: directory.path, delegate: $0) }
    }

    func testCallbackArrivesWithinMillisecondsOfAFileAppearing() {
        let arrived = expectation(description: "first callback")
        let start = DispatchTime.now()
        let elapsed = LockedValue<UInt64>(0)
        recorder.onBatch = { _, _ in
            elapsed.set(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds)
            arrived.fulfill()
        }
        directory.touch("new.txt")
        wait(for: [arrived], timeout: 10)
        // Generous for a loaded 2-core machine; typically well under a millisecond.
        XCTAssertLessThan(elapsed.get(), 250_000_000, "callback took \(elapsed.get() / 1000) µs")
    }

    func testCreateWriteAttributesRemove() {
        let file = directory.touch("a.txt")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, file)])
        directory.write("a.txt", "hello")
        XCTAssertEqual(delivered(), [DirectoryChange(.modified, file)])
        chmod(file, 0o600)
        XCTAssertEqual(delivered(), [DirectoryChange(.attributesChanged, file)])
        unlink(file)
        XCTAssertEqual(delivered(), [DirectoryChange(.removed, file)])
    }

    func testDirectoriesAreMarked() {
        let sub = directory.mkdir("sub")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, sub, directory: true)])
        rmdir(sub)
        XCTAssertEqual(delivered(), [DirectoryChange(.removed, sub, directory: true)])
    }

    func testRenameWithinTheDirectoryIsOnePairedChange() {
        let old = directory.touch("old.txt")
        _ = delivered()
        let new = directory.url("new.txt")
        rename(old, new)
        XCTAssertEqual(delivered(), [DirectoryChange(.renamed, new, from: old)])
    }

    func testRenameOverAnExistingFileIsStillOneRename() {
        let old = directory.touch("draft")
        let target = directory.touch("final")
        _ = delivered()
        rename(old, target)
        XCTAssertEqual(delivered(), [DirectoryChange(.renamed, target, from: old)])
    }

    func testMovesInAndOutOfAnUnwatchedDirectory() throws {
        let outside = TemporaryDirectory()
        let source = outside.touch("incoming")
        let inside = directory.url("incoming")
        rename(source, inside)
        XCTAssertEqual(delivered(), [DirectoryChange(.movedIn, inside)])
        rename(inside, outside.url("outgoing"))
        XCTAssertEqual(delivered(), [DirectoryChange(.movedOut, inside)])
    }

    func testMoveBetweenTwoWatchersIsOutForOneAndInForTheOther() throws {
        let other = TemporaryDirectory()
        let otherRecorder = Recorder()
        let otherWatcher = try DirectoryWatcher.watchFolder(path: other.path, delegate: otherRecorder)
        defer { otherWatcher.invalidate() }
        let source = directory.touch("travels")
        _ = delivered()
        rename(source, other.url("travels"))
        XCTAssertEqual(delivered(), [DirectoryChange(.movedOut, source)])
        waitForDelivery(otherWatcher)
        XCTAssertEqual(otherRecorder.changes, [DirectoryChange(.movedIn, other.url("travels"), from: source)])
    }

    func testEventsArriveInKernelOrder() {
        let names = (0..<300).map { String(format: "%03d", $0) }
        for name in names { directory.touch(name) }
        XCTAssertEqual(delivered(), names.map { DirectoryChange(.created, directory.url($0)) })
    }

    func testNameThatIsNotUTF8OpensTheSameFileAgain() {
        let name: [UInt8] = Array("bad-".utf8) + [0xFF, 0xFE] + Array(".txt".utf8)
        let path = FileSystemPath(directory.path).appending(FileSystemPath(bytes: name))
        let fd = path.withCString { open($0, O_CREAT | O_WRONLY, 0o644) }
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        let changes = delivered()
        XCTAssertEqual(changes, [DirectoryChange(kind: .created, path: path, isDirectory: false)])
        XCTAssertNil(changes.first?.path.string, "not valid UTF-8, so no lossy String")
        XCTAssertEqual(changes.first?.path.description, directory.path + "/bad-\\xFF\\xFE.txt")
        let reopened = changes.first!.path.withCString { open($0, O_RDONLY) }
        XCTAssertGreaterThanOrEqual(reopened, 0, "the delivered path must name the file")
        close(reopened)
    }

    func testNamesWithSpacesNewlinesAndQuotes() {
        let names = ["with space", "new\nline", "quote\"d", "back\\slash", "tab\there", "ü-ñ-漢字", "\u{1B}[31mred"]
        for name in names { directory.touch(name) }
        XCTAssertEqual(delivered(), names.map { DirectoryChange(.created, directory.url($0)) })
    }

    func testRepeatedWritesToOneFileFoldIntoOneChange() throws {
        let file = directory.touch("log")
        _ = delivered()
        // Writes that wait to be read together are one change. (Read as they come, which a fast
        // reader on another core may do, each is its own: that is not folding's to change.)
        let staller = try Staller(test: self)
        let fd = open(file, O_WRONLY)
        for _ in 0..<50 {
            var byte: UInt8 = 0x2A
            XCTAssertEqual(Glibc.write(fd, &byte, 1), 1)
        }
        close(fd)
        staller.resume()
        XCTAssertEqual(delivered(), [DirectoryChange(.modified, file)], "consecutive writes fold")
    }

    func testWritesReadAsTheyComeAreEachAModification() {
        let file = directory.touch("log")
        _ = delivered()
        let fd = open(file, O_WRONLY)
        for _ in 0..<50 {
            var byte: UInt8 = 0x2A
            XCTAssertEqual(Glibc.write(fd, &byte, 1), 1)
        }
        close(fd)
        let changes = delivered()
        XCTAssertFalse(changes.isEmpty)
        XCTAssertLessThanOrEqual(changes.count, 50)
        XCTAssertTrue(changes.allSatisfy { $0 == DirectoryChange(.modified, file) })
    }

    func testRootAttributesChange() {
        chmod(directory.path, 0o711)
        XCTAssertEqual(delivered(), [DirectoryChange(.attributesChanged, directory.path, directory: true)])
    }

    func testRemovingTheRootStopsTheWatcher() {
        directory.touch("doomed")
        _ = delivered()
        unlink(directory.url("doomed"))
        rmdir(directory.path)
        XCTAssertEqual(
            delivered(),
            [
                DirectoryChange(.removed, directory.url("doomed")),
                DirectoryChange(.rootRemoved, directory.path, directory: true),
            ])
        XCTAssertFalse(watcher.isValid)
    }

    func testMovingTheRootStopsTheWatcher() {
        let moved = directory.path + ".moved"
        rename(directory.path, moved)
        defer { try? FileManager.default.removeItem(atPath: moved) }
        XCTAssertEqual(delivered(), [DirectoryChange(.rootMoved, directory.path, directory: true)])
        XCTAssertFalse(watcher.isValid)
        // Nothing more arrives from the directory's new place.
        close(open(moved + "/late", O_CREAT | O_WRONLY, 0o644))
        XCTAssertEqual(delivered(), [])
    }

    func testDirectoryDidChangeIsCalledOncePerBatch() {
        directory.touch("one")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.didChangeCount, recorder.batches)
        XCTAssertGreaterThanOrEqual(recorder.didChangeCount, 1)
    }

    func testRelativePathsAreResolvedAgainstTheCurrentDirectory() throws {
        let previous = FileManager.default.currentDirectoryPath
        XCTAssertTrue(FileManager.default.changeCurrentDirectoryPath(directory.path))
        defer { _ = FileManager.default.changeCurrentDirectoryPath(previous) }
        let relative = try DirectoryWatcher.watchFolder(path: "./", delegate: recorder)
        defer { relative.invalidate() }
        XCTAssertEqual(relative.path, FileSystemPath(directory.path))
    }

    func testCallbacksRunOnTheGivenQueue() throws {
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "callbacks", attributes: .concurrent)
        queue.setSpecific(key: key, value: "callbacks")
        let onQueue = LockedValue<[String?]>([])
        let other = Recorder()
        other.onBatch = { _, _ in onQueue.update { $0.append(DispatchQueue.getSpecific(key: key)) } }
        let queued = try DirectoryWatcher.watchFolder(path: directory.path, delegate: other, queue: queue)
        defer { queued.invalidate() }
        for index in 0..<20 { directory.touch("q\(index)") }
        waitForDelivery(queued)
        XCTAssertFalse(onQueue.get().isEmpty)
        XCTAssertEqual(Set(onQueue.get()), ["callbacks"])
        XCTAssertEqual(
            other.changes.map(\.path.lastComponent.description), (0..<20).map { "q\($0)" },
            "a concurrent queue still gets one batch at a time, in order")
    }

    func testClosureForm() throws {
        let seen = LockedValue<[DirectoryChange]>([])
        let closureWatcher = try DirectoryWatcher.watchFolder(path: directory.path) { changes in
            seen.update { $0 += changes }
        }
        defer { closureWatcher.invalidate() }
        let file = directory.touch("via-closure")
        waitForDelivery(closureWatcher)
        XCTAssertEqual(seen.get(), [DirectoryChange(.created, file)])
    }

    /// The closure form's handler is held strongly (not weakly, as a delegate is): it is the
    /// watcher's delegate until another is set, which then takes the batches and lets it go.
    func testAClosureFormsHandlerIsItsDelegateUntilAnotherIsSet() throws {
        final class Token: Sendable {}
        weak var captured: Token?
        let seen = LockedValue<[DirectoryChange]>([])
        let closureWatcher = try { () throws -> DirectoryWatcher in
            let token = Token()
            captured = token
            return try DirectoryWatcher.watchFolder(path: directory.path) { changes in
                withExtendedLifetime(token) { seen.update { $0 += changes } }
            }
        }()
        defer { closureWatcher.invalidate() }
        XCTAssertNotNil(closureWatcher.delegate, "the handler's delegate")
        XCTAssertNotNil(captured, "the watcher keeps its handler alive")
        let first = directory.touch("to-the-closure")
        waitForDelivery(closureWatcher)
        XCTAssertEqual(seen.get(), [DirectoryChange(.created, first)])

        let other = Recorder()
        closureWatcher.delegate = other
        XCTAssertTrue(closureWatcher.delegate === other)
        XCTAssertNil(captured, "the handler, no longer the delegate, is let go")
        let second = directory.touch("to-the-delegate")
        waitForDelivery(closureWatcher)
        XCTAssertEqual(other.changes, [DirectoryChange(.created, second)])
        XCTAssertEqual(seen.get(), [DirectoryChange(.created, first)])
    }

    func testAsyncBarrier() async throws {
        let file = directory.touch("async")
        await watcher.barrier()
        XCTAssertEqual(recorder.changes, [DirectoryChange(.created, file)])
    }
}
