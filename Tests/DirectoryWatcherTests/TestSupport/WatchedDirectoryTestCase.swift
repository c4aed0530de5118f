import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// A test case with a fresh temporary directory for each test and, once the test (or its
/// `setUp`) calls ``watch(_:)``, a watcher whose changes a ``Recorder`` keeps.
///
/// The watcher is invalidated, and the directory removed, after each test.
class WatchedDirectoryTestCase: XCTestCase {
    /// Made before each test, removed with everything in it after the test.
    var directory: TemporaryDirectory!
    /// The watcher ``watch(_:)`` made; its delegate is ``recorder``.
    var watcher: DirectoryWatcher!
    /// Records what ``watcher`` delivers.
    var recorder: Recorder!

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = TemporaryDirectory()
    }

    override func tearDown() {
        watcher?.invalidate()
        watcher = nil
        recorder = nil
        directory = nil
        super.tearDown()
    }

    /// Makes ``watcher`` with `make`, given a fresh ``recorder`` as the delegate.
    func watch(_ make: (Recorder) throws -> DirectoryWatcher) rethrows {
        let recorder = Recorder()
        watcher = try make(recorder)
        self.recorder = recorder
    }

    /// The changes delivered since the last call: waits, through the barrier, until every change
    /// made so far has been delivered, then returns them and forgets them.
    func delivered() -> [DirectoryChange] {
        waitForDelivery(watcher)
        defer { recorder.reset() }
        return recorder.changes
    }
}
