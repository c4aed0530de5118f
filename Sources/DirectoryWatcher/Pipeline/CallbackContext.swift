import CDirectoryWatcherShims

/// Whether the calling thread is running code on the library's behalf: a delegate callback, a
/// closure handler, a barrier completion (on any watcher's queue), or anything on a loop thread.
///
/// ``DirectoryWatcher/invalidate()`` waits for a callback in progress on another thread only when
/// the caller is outside this context. Inside it, waiting could close a cycle the library cannot
/// see through: two callbacks invalidating each other's watchers each wait for the other, and a
/// loop thread waiting for a callback stops the reading that the callback may be waiting on.
enum CallbackContext {
    /// True on a thread inside ``run(_:)``, or on a loop thread.
    static var isActive: Bool { cdw_callback_depth() > 0 }

    /// Runs `body` inside the context (nests).
    @inline(__always)
    static func run<Result>(_ body: () throws -> Result) rethrows -> Result {
        cdw_callback_depth_add(1)
        defer { cdw_callback_depth_add(-1) }
        return try body()
    }

    /// Marks the calling thread as inside the context for the rest of its life: a loop thread.
    static func enterForThreadLifetime() {
        cdw_callback_depth_add(1)
    }
}
