@_spi(DirectoryWatcherTesting) import DirectoryWatcher
import Foundation
import Glibc

extension DirectoryWatcher {
    /// Overflows the kernel's queue on disk, then runs `changes`, whose events are lost with the
    /// rest: the watcher reports `DirectoryChange/Kind/overflow` and then, with exact recovery
    /// (the default), what its rescan finds, which is what `changes` did.
    ///
    /// The queue is filled from elsewhere: while the event loop reads nothing, a file is made and
    /// removed, again and again, in a scratch directory of its own that another watcher on the
    /// same loop (the same inotify instance) watches, until the queue (`max_queued_events`) is
    /// full; then `changes` runs. This watcher sees none of the filling: only the overflow and
    /// the rescan's findings. Takes a fraction of a second at the kernel's default size.
    ///
    /// - Throws: The fixture's or the scratch watcher's error; `DirectoryWatcherError` with
    ///   `invalidated` when this watcher does not watch now, or `invalidOption` for a simulated
    ///   watcher, which has ``SimulatedFileSystem/losingEvents(_:)`` instead.
    public func overflowQueue(then changes: () throws -> Void) throws {
        guard let loop = eventLoop else {
            throw DirectoryWatcherError(code: .invalidated, path: path, detail: "the watcher is not watching")
        }
        guard !SimulatedFileSystem.isSimulated(loop) else {
            throw DirectoryWatcherError(
                code: .invalidOption, path: path,
                detail:
                    "the watcher is a simulated file system's: overflow it with SimulatedFileSystem.losingEvents(_:)")
        }
        let scratch = try TemporaryDirectory(prefix: "DirectoryWatcherTesting-overflow")
        let filling = try DirectoryWatcher.watchFolder(path: scratch.path, on: loop) { _ in }
        defer { filling.invalidate() }
        let filler = scratch.path("filler")
        let capacity = Self.queueCapacity()
        try withEventLoopHeld {
            // A creation and a removal each time: two events, never merged with the one before.
            for _ in 0...(capacity / 2 + 1) {
                let fd = open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
                guard fd >= 0 else {
                    throw TemporaryDirectoryError(path: filler, action: "could not be made", errno: errno)
                }
                close(fd)
                unlink(filler)
            }
            try changes()
        }
    }

    /// `fs.inotify.max_queued_events`, or the kernel's default when it cannot be read.
    static func queueCapacity() -> Int {
        let text = try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8)
        return text.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }.flatMap { $0 > 0 ? $0 : nil }
            ?? 16_384
    }
}
