import CDirectoryWatcherShims
import Glibc

/// With `--state`, a line counts as delivered once the reader of dirwatch's pipe has read it, not
/// once it is written: a saved state never counts a line still in the pipe, which a reader that
/// exits (a broker client that could not connect) would take with it.
///
/// The kernel says when a pipe has room, never when it is empty; but a pipe of one buffer (one
/// page, set with F_SETPIPE_SZ) has room only when it is empty, so the wait is a `poll` for
/// POLLOUT, woken by the reader's read, with no timer. A pipe whose reader is gone wakes it at
/// once (POLLERR). Where the size cannot be set (the pipe already holds more than a page), the
/// wait looks at the unread bytes (FIONREAD) in waits that double from 1 to 64 ms.
struct PipeReading {
    let descriptor: Int32
    /// The pipe holds one buffer: writable means read to the end.
    let writableMeansEmpty: Bool

    /// The wait for `descriptor` when it is a pipe; nil for a file, a terminal or a socket, which
    /// take what is written at once or cannot say what their reader has read.
    init?(_ descriptor: Int32) {
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFIFO else { return nil }
        self.descriptor = descriptor
        self.writableMeansEmpty = cdw_pipe_hold_one_buffer(descriptor) >= 0
    }

    /// Returns once everything written into the pipe has been read: true, or false when the
    /// reader is gone first (what it left unread is lost with the pipe).
    func waitUntilRead() -> Bool {
        var timeout: Int32 = 1
        while true {
            if !writableMeansEmpty && cdw_unread_bytes(descriptor) <= 0 { return true }
            // POLLERR comes whatever is asked for: a pipe's writing end with no reader.
            var entry = pollfd(fd: descriptor, events: writableMeansEmpty ? Int16(POLLOUT) : 0, revents: 0)
            let ready = poll(&entry, 1, writableMeansEmpty ? -1 : timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                return true  // cannot wait: as without --state
            }
            if entry.revents & Int16(POLLERR) != 0 { return false }
            if writableMeansEmpty && entry.revents & Int16(POLLOUT) != 0 { return true }
            timeout = min(timeout * 2, 64)
        }
    }
}
