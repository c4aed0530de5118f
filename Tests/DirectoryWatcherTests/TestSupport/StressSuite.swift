import Dispatch
import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// The stress suite: the long runs (kernel-sized overflows of 16,384 events and more, the soak,
/// bursts of 20,000 changes, thousands of lifetime cycles). `swift test` skips them, counted as
/// skipped; `DIRWATCH_STRESS=1 swift test` runs them too, and `.ci/run` always does.
enum StressSuite {
    static let isEnabled = ProcessInfo.processInfo.environment["DIRWATCH_STRESS"] == "1"

    /// Skips the calling test unless the stress suite was asked for.
    static func require() throws {
        if !isEnabled { throw XCTSkip("a stress test: DIRWATCH_STRESS=1 swift test runs it") }
    }
}

/// How big a test that runs in both suites makes its load: small in `swift test`, the real size
/// (a kernel queue overflowed by filling it) in the stress suite.
enum Scale {
    case fast, stress
}

/// Stops the process's loop from reading, as a stopped process would: a watcher delivered on
/// the loop thread (no standby) blocks in its callback until ``resume()``.
final class Staller: @unchecked Sendable {
    private let release = DispatchSemaphore(value: 0)
    private let directory = TemporaryDirectory()
    private var watcher: DirectoryWatcher?

    private final class Blocker: DirectoryWatcherDelegate, @unchecked Sendable {
        let started: XCTestExpectation
        let release: DispatchSemaphore
        init(started: XCTestExpectation, release: DispatchSemaphore) {
            self.started = started
            self.release = release
        }
        let blocked = LockedValue(false)
        /// Blocks in the first batch only: later ones (the overflow notice every watcher of the
        /// loop gets) must not block again, or `resume()` would wait for ever on its invalidate.
        func directoryDidChange(_ watcher: DirectoryWatcher) {
            guard !blocked.get() else { return }
            blocked.set(true)
            started.fulfill()
            release.wait()
        }
    }

    /// Stalls `loop`, or the process's shared loop when nil.
    init(test: XCTestCase, loop: EventLoop? = nil) throws {
        let started = test.expectation(description: "the loop is stalled")
        started.assertForOverFulfill = false
        let options = DirectoryWatcher.Options(delivery: .eventLoopThread)
        watcher = try DirectoryWatcher.make(
            path: directory.path, options: options,
            delegate: Blocker(started: started, release: release), retainingDelegate: true, queue: nil, loop: loop)
        directory.touch("stall")
        test.wait(for: [started], timeout: 10)
    }

    func resume() {
        release.signal()
        watcher?.invalidate()
        watcher = nil
    }
}

/// Loses the kernel's event queue while the loop is stalled: at ``Scale/fast`` through the
/// syscall table (``SystemCalls/overflowingNextRead(_:)``: the queue read and dropped, an
/// overflow record in its place) on a loop of its own, ``loop``; at ``Scale/stress`` the
/// kernel's own way, on the shared loop, by filling the queue past `max_queued_events`.
final class QueueLoss: @unchecked Sendable {
    let scale: Scale
    /// The loop the watchers of the test must use: nil (the shared loop) at stress scale.
    let loop: EventLoop?
    private let injection = OverflowInjection()

    /// Whether the queue lost at fast scale is fanotify's (the watchers are fanotify trees).
    private let fanotify: Bool

    init(_ scale: Scale, fanotify: Bool = false) throws {
        self.scale = scale
        self.fanotify = fanotify
        loop = scale == .fast ? try EventLoop(system: System(.live.overflowingNextRead(injection))) : nil
    }

    /// `fs.inotify.max_queued_events`.
    static let queueLimit: Int = {
        let text = (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8)) ?? ""
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 16_384
    }()

    /// Stalls the loop, overflows its queue (at stress scale with `filler-N` files made in
    /// `fillers`, or by `lost` itself when nil), runs `lost`, whose events are then lost too, and
    /// lets the loop go.
    func lose(test: XCTestCase, fillers: TemporaryDirectory?, _ lost: () throws -> Void) throws {
        let staller = try Staller(test: test, loop: loop)
        if scale == .stress, let fillers {
            for index in 0..<(Self.queueLimit + 3_600) { fillers.touch("filler-\(index)") }
        }
        try lost()
        if scale == .fast { injection.arm(fanotify: fanotify) }
        staller.resume()
    }

    func shutdown() { loop?.shutdown() }
}
