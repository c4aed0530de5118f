import DirectoryWatcher
import DirectoryWatcherTesting
import XCTest

/// The simulated kernel under a real watcher: each hard case a user's test needs, delivered by
/// the library's own code.
final class SimulatedFileSystemTests: XCTestCase {
    private var files: SimulatedFileSystem!

    override func setUp() {
        files = SimulatedFileSystem()
        files.createDirectory("/inbox")
    }

    override func tearDown() {
        files = nil
    }

    func testACreatedFileIsDelivered() async throws {
        let watcher = try files.watchFolder(path: "/inbox") { _ in }
        let changes = await watcher.changes { files.createFile("/inbox/a.txt") }
        assertChanges(changes, [.created("a.txt", isDirectory: false)], under: watcher)
        watcher.invalidate()
    }

    func testARenameIsOneChangeWithBothPaths() async throws {
        files.createFile("/inbox/draft.txt")
        let watcher = try files.watchFolder(path: "/inbox") { _ in }
        let changes = await watcher.changes { files.rename("/inbox/draft.txt", to: "/inbox/final.txt") }
        assertChanges(changes, [.renamed("draft.txt", to: "final.txt")], under: watcher)
        watcher.invalidate()
    }

    func testAnOverflowIsRecoveredByARescanThatFindsWhatWasLost() async throws {
        files.createFile("/inbox/old.txt")
        let watcher = try files.watchFolder(path: "/inbox") { _ in }
        let changes = await watcher.changes {
            files.losingEvents {
                files.createFile("/inbox/new.txt")
                files.remove("/inbox/old.txt")
            }
        }
        assertChanges(
            changes,
            [.overflow, .removed("old.txt", foundByRescan: true), .created("new.txt", foundByRescan: true)],
            under: watcher)
        watcher.invalidate()
    }

    func testAnOnDiskOverflowOfASimulatedWatcherSaysWhatToUseInstead() throws {
        let watcher = try files.watchFolder(path: "/inbox") { _ in }
        defer { watcher.invalidate() }
        var ran = false
        XCTAssertThrowsError(try watcher.overflowQueue { ran = true }) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .invalidOption)
            XCTAssertTrue("\(error)".contains("SimulatedFileSystem.losingEvents"), "\(error)")
        }
        XCTAssertFalse(ran)
    }

    func testRemovingTheWatchedFolderEndsTheWatch() async throws {
        let watcher = try files.watchFolder(path: "/inbox") { _ in }
        let changes = await watcher.changes { files.remove("/inbox") }
        assertChanges(changes, [.rootRemoved], under: watcher)
        XCTAssertFalse(watcher.isMonitoring)
    }

    func testARefusedWatchThrowsItsCode() throws {
        for code: DirectoryWatcherError.Code in [.permissionDenied, .watchLimitReached, .outOfMemory] {
            files.refuseWatches(of: "/inbox", with: code)
            XCTAssertThrowsError(try files.watchFolder(path: "/inbox") { _ in }) { error in
                XCTAssertEqual((error as? DirectoryWatcherError)?.code, code)
                XCTAssertEqual((error as? DirectoryWatcherError)?.path.description, "/inbox")
            }
        }
        XCTAssertThrowsError(try files.watchFolder(path: "/missing") { _ in }) { error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .noSuchPath)
        }
    }

    func testATreeReportsADirectoryItCannotWatchAndGoesOn() async throws {
        files.createDirectory("/inbox/locked")
        files.refuseWatches(of: "/inbox/locked", with: .permissionDenied)
        var options = DirectoryWatcher.Options()
        options.recursive = true
        let log = Locked<[DirectoryChange]>([])
        let watcher = try files.watchFolder(path: "/inbox", options: options) { batch in log.append(batch) }
        let changes = await watcher.changes { files.createFile("/inbox/a.txt") }
        assertChanges(log.value, contain: [.failed("locked")], under: "/inbox")
        assertChanges(changes, [.created("a.txt")], under: watcher)
        watcher.invalidate()
    }

    /// The tree's race, as the kernel makes it: what is made in a directory before the loop
    /// watches it queues no event, and a rename out of a directory not watched yet is a move in.
    /// Whichever way the loop's thread and the test's interleave, what was reported adds up to
    /// the tree, and the watcher watches each of its directories.
    func testATreeBuiltFromItsChangesIsTheTreeWhateverTheRace() async throws {
        var options = DirectoryWatcher.Options()
        options.recursive = true
        let watcher = try files.watchFolder(path: "/inbox", options: options) { _ in }
        let changes = await watcher.changes {
            files.createDirectory("/inbox/a/b/c")
            files.createFile("/inbox/a/b/c/x.txt")
            files.rename("/inbox/a/b", to: "/inbox/b")
            files.createFile("/inbox/b/c/y.txt")
        }
        var model: Set<String> = []
        for change in changes {
            let path = change.path.description
            switch change.kind {
            case .created, .movedIn: model.insert(path)
            case .renamed:
                let old = change.oldPath!.description
                model = Set(
                    model.map { $0 == old ? path : $0.hasPrefix(old + "/") ? path + $0.dropFirst(old.count) : $0 })
            default: break
            }
        }
        XCTAssertEqual(
            model, ["/inbox/a", "/inbox/b", "/inbox/b/c", "/inbox/b/c/x.txt", "/inbox/b/c/y.txt"], "\(changes)")
        XCTAssertEqual(
            Set(watcher.watchedDirectories().map(\.description)), ["/inbox", "/inbox/a", "/inbox/b", "/inbox/b/c"])
        watcher.invalidate()
    }

    func testARenameWhoseSecondHalfNeverComesIsAMoveOutOnceItsWindowHasPassed() async throws {
        files.createDirectory("/elsewhere")
        files.createFile("/inbox/a.txt")
        let watcher = try files.watchFolder(path: "/inbox") { _ in }
        let log = ChangeLog(watching: watcher)
        files.rename("/inbox/a.txt", to: "/elsewhere/a.txt")
        files.passTime(.milliseconds(10))
        await log.settle()
        assertChanges(log.changes, [.movedOut("a.txt")], under: watcher)
        watcher.invalidate()
    }

    func testAPausedWatcherHandsOverWhatHappenedAsOneResumingBatch() async throws {
        let watcher = try files.watchFolder(path: "/inbox") { _ in }
        let log = ChangeLog(watching: watcher)
        XCTAssertTrue(watcher.pause())
        files.createFile("/inbox/a.txt")
        files.createFile("/inbox/b.txt")
        await log.settle()
        XCTAssertEqual(log.changes, [], "delivered while paused")
        XCTAssertTrue(watcher.resume())
        await log.settle()
        XCTAssertEqual(log.batches.count, 1)
        assertChanges(log.changes, [.created("a.txt"), .created("b.txt")], under: watcher)
        XCTAssertTrue(log.changes.allSatisfy(\.whilePaused))
        watcher.invalidate()
    }

    func testAFileWatchFollowsAnAtomicSave() async throws {
        final class Delegate: DirectoryWatcherDelegate {}
        let delegate = Delegate()
        files.createFile("/inbox/config.toml")
        let watcher = try files.watchFile(path: "/inbox/config.toml", delegate: delegate)
        let changes = await watcher.changes {
            files.createFile("/inbox/config.toml.tmp")
            files.rename("/inbox/config.toml.tmp", to: "/inbox/config.toml")
            files.write("/inbox/config.toml")
        }
        assertChanges(
            changes, [.renamed("config.toml.tmp", to: "config.toml"), .modified("config.toml")], under: "/inbox")
        watcher.invalidate()
    }

    func testTheAsyncSequenceGivesEachChangeAndEndsWithTheFolder() async throws {
        let sequence = try files.changes(path: "/inbox")
        files.createFile("/inbox/a.txt")
        files.remove("/inbox")
        var seen: [DirectoryChange] = []
        for await change in sequence { seen.append(change) }
        assertChanges(seen, [.created("a.txt"), .removed("a.txt"), .rootRemoved], under: "/inbox")
    }

    func testASettledBatchComesOnceItsQuietPeriodHasPassed() async throws {
        var options = DirectoryWatcher.Options()
        options.settling = .init(quietPeriod: .seconds(2))
        let watcher = try files.watchFolder(path: "/inbox", options: options) { _ in }
        let log = ChangeLog(watching: watcher)
        // A watcher that does not settle: once its barrier is through, the loop has routed the
        // writes to both.
        let unsettled = try files.watchFolder(path: "/inbox") { _ in }
        files.beginWriting("/inbox/big.iso")
        files.endWriting("/inbox/big.iso")
        files.passTime(.seconds(1))
        await unsettled.barrier()
        XCTAssertEqual(log.changes, [], "handed over before the quiet period passed")
        files.passTime(.seconds(1))
        await log.settle()
        assertChanges(log.changes, [.created("big.iso")], under: watcher)
        watcher.invalidate()
        unsettled.invalidate()
    }
}

/// A value shared with a callback.
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.withLock { stored } }
    func update(_ body: (inout Value) -> Void) { lock.withLock { body(&stored) } }
}

extension Locked where Value == [DirectoryChange] {
    func append(_ batch: [DirectoryChange]) { update { $0 += batch } }
}
