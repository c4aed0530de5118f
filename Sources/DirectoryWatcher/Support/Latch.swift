/// A one-shot gate: once ``open()`` has been called, every ``wait()`` returns, at once or as
/// soon as it opens. For "returns once X has happened" on a thread that may block.
final class Latch: @unchecked Sendable {
    private let lock = Lock()
    /// Under `lock`.
    private var isOpen = false

    func open() {
        lock.withLock {
            isOpen = true
            lock.broadcast()
        }
    }

    /// Whether ``open()`` has been called (a look that never waits).
    var isOpened: Bool { lock.withLock { isOpen } }

    func wait() {
        lock.withLock {
            while !isOpen { lock.wait() }
        }
    }
}
