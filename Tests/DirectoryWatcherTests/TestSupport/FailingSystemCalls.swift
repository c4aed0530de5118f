import Foundation

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Injected failures: one entry of a ``SystemCalls`` table made to fail with an errno.
///
///     System(.live.failing(\.epollCreate1, errno: EMFILE))
///     System(.live.failing(\.inotifyAddWatch, errno: EINTR, times: 3, counting: attempts))
///
/// - `times`: how many calls fail before the entry makes its call again (the `EINTR` retry
///   tests); every call by default.
/// - `counting`: counts every call of the entry, failed or made.
/// - `when`: fails only the calls it accepts (those on one path, say); the others are made.
///
/// A failure follows the entry's convention: `errno` is set and -1 returned (nil for `getcwd`),
/// except `pthreadCreate`, which returns the error number and leaves `errno` alone. A call that
/// does not fail goes to the entry of the table `failing` was called on, so failures chain.
extension SystemCalls {
    func failing<A, Result: InjectableResult>(
        _ call: WritableKeyPath<SystemCalls, @Sendable (A) -> Result>, errno code: Int32, times: Int = .max,
        counting calls: LockedValue<Int>? = nil, when shouldFail: @escaping @Sendable (A) -> Bool = { _ in true }
    ) -> SystemCalls {
        let injection = Injection(call, errno: code, times: times, calls: calls)
        let original = self[keyPath: call]
        var table = self
        table[keyPath: call] = { a in injection.call(failing: shouldFail(a)) { original(a) } }
        return table
    }

    func failing<A, B, Result: InjectableResult>(
        _ call: WritableKeyPath<SystemCalls, @Sendable (A, B) -> Result>, errno code: Int32, times: Int = .max,
        counting calls: LockedValue<Int>? = nil,
        when shouldFail: @escaping @Sendable (A, B) -> Bool = { _, _ in true }
    ) -> SystemCalls {
        let injection = Injection(call, errno: code, times: times, calls: calls)
        let original = self[keyPath: call]
        var table = self
        table[keyPath: call] = { a, b in injection.call(failing: shouldFail(a, b)) { original(a, b) } }
        return table
    }

    func failing<A, B, C, Result: InjectableResult>(
        _ call: WritableKeyPath<SystemCalls, @Sendable (A, B, C) -> Result>, errno code: Int32, times: Int = .max,
        counting calls: LockedValue<Int>? = nil,
        when shouldFail: @escaping @Sendable (A, B, C) -> Bool = { _, _, _ in true }
    ) -> SystemCalls {
        let injection = Injection(call, errno: code, times: times, calls: calls)
        let original = self[keyPath: call]
        var table = self
        table[keyPath: call] = { a, b, c in injection.call(failing: shouldFail(a, b, c)) { original(a, b, c) } }
        return table
    }

    func failing<A, B, C, D, E, Result: InjectableResult>(
        _ call: WritableKeyPath<SystemCalls, @Sendable (A, B, C, D, E) -> Result>, errno code: Int32,
        times: Int = .max, counting calls: LockedValue<Int>? = nil,
        when shouldFail: @escaping @Sendable (A, B, C, D, E) -> Bool = { _, _, _, _, _ in true }
    ) -> SystemCalls {
        let injection = Injection(call, errno: code, times: times, calls: calls)
        let original = self[keyPath: call]
        var table = self
        table[keyPath: call] = { a, b, c, d, e in
            injection.call(failing: shouldFail(a, b, c, d, e)) { original(a, b, c, d, e) }
        }
        return table
    }
}

/// What a raw call returns when it fails with `code`, having set `errno`.
protocol InjectableResult: SendableMetatype {
    static func failure(_ code: Int32) -> Self
}

extension Int32: InjectableResult {
    static func failure(_ code: Int32) -> Int32 {
        Glibc.errno = code
        return -1
    }
}

extension Int: InjectableResult {
    static func failure(_ code: Int32) -> Int {
        Glibc.errno = code
        return -1
    }
}

extension Optional: InjectableResult where Wrapped == UnsafeMutablePointer<CChar> {
    static func failure(_ code: Int32) -> Self {
        Glibc.errno = code
        return nil
    }
}

/// One injected failure's state, shared by every call of its entry, from any thread.
private final class Injection: @unchecked Sendable {
    private let code: Int32
    private let times: Int
    private let calls: LockedValue<Int>?
    /// `pthread_create` returns the error number instead of setting `errno`.
    private let returnsErrorNumber: Bool
    private let lock = NSLock()
    private var failures = 0

    init(_ call: AnyKeyPath, errno code: Int32, times: Int, calls: LockedValue<Int>?) {
        self.code = code
        self.times = times
        self.calls = calls
        returnsErrorNumber = call == \SystemCalls.pthreadCreate
    }

    /// Fails this call if `failing` and fewer than `times` calls have failed; otherwise makes it.
    func call<Result: InjectableResult>(failing: Bool, _ original: () -> Result) -> Result {
        calls?.update { $0 += 1 }
        let fails =
            failing
            && lock.withLock {
                guard failures < times else { return false }
                failures += 1
                return true
            }
        guard fails else { return original() }
        if returnsErrorNumber, let number = code as? Result { return number }
        return .failure(code)
    }
}

extension SystemCalls {
    /// This table, with the next read of more than a header's 16 bytes made after `armed` is set
    /// cut short by one byte: a truncated record, which the loop reports as possible loss, as it
    /// does a kernel overflow. `armed` is cleared when it has struck.
    func truncatingNextRead(armed: LockedValue<Bool>) -> SystemCalls {
        var calls = self
        let read = self.read
        calls.read = { fd, buffer, count in
            let result = read(fd, buffer, count)
            if result > 16 && armed.get() {
                armed.set(false)
                return result - 1
            }
            return result
        }
        return calls
    }
}

/// Losing a kernel queue on demand: once ``arm(fanotify:)`` is called, the next read of that kind
/// of queue (inotify's, or fanotify's) loses it, as a kernel whose queue overflowed while nobody
/// read it.
final class OverflowInjection: @unchecked Sendable {
    private let pending = LockedValue<Set<QueueKind>>([])

    /// Arms the next read of inotify's queue, or with `fanotify` of fanotify's instead.
    func arm(fanotify: Bool = false) { pending.set([fanotify ? .fanotify : .inotify]) }

    var isArmed: Bool { !pending.get().isEmpty }

    /// Whether this read of a `kind` queue is the one to lose it (each kind once per arming).
    fileprivate func strikes(_ kind: QueueKind) -> Bool {
        var struck = false
        pending.update { struck = $0.remove(kind) != nil }
        return struck
    }
}

extension SystemCalls {
    /// This table, with the next read of an inotify or a fanotify descriptor (as armed) made after
    /// `injection` is armed losing the whole queue: every event queued so far is read and
    /// dropped, and one overflow record (`IN_Q_OVERFLOW`, or `FAN_Q_OVERFLOW`) is returned in
    /// their place. Events queued after it come as usual.
    ///
    /// The overflow is real to the library (it cannot tell the two apart), and costs a handful of
    /// changes instead of the 16,384 and more that `fs.inotify.max_queued_events` takes.
    func overflowingNextRead(_ injection: OverflowInjection) -> SystemCalls {
        var calls = self
        let read = self.read
        calls.read = { fd, buffer, count in
            guard count >= 24, injection.isArmed, let kind = QueueKind(of: fd), injection.strikes(kind) else {
                return read(fd, buffer, count)
            }
            // The descriptor is non-blocking: read to the end of its queue, dropping it all.
            var result = read(fd, buffer, count)
            while result > 0 { result = read(fd, buffer, count) }
            return kind.writeOverflowRecord(into: buffer)
        }
        return calls
    }
}

/// The two kinds of kernel queue a loop reads, told apart by what `/proc/self/fd` says of them.
private enum QueueKind: Hashable {
    case inotify, fanotify

    init?(of fd: Int32) {
        let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")) ?? ""
        switch target {
        case "anon_inode:inotify": self = .inotify
        case "anon_inode:[fanotify]": self = .fanotify
        default: return nil
        }
    }

    /// Writes the kernel's overflow record at the start of `buffer`; returns its length.
    func writeOverflowRecord(into buffer: UnsafeMutableRawPointer) -> Int {
        switch self {
        case .inotify:
            // struct inotify_event: wd -1, mask, cookie, len (no name).
            buffer.storeBytes(of: Int32(-1), toByteOffset: 0, as: Int32.self)
            buffer.storeBytes(of: UInt32(IN_Q_OVERFLOW), toByteOffset: 4, as: UInt32.self)
            buffer.storeBytes(of: UInt32(0), toByteOffset: 8, as: UInt32.self)
            buffer.storeBytes(of: UInt32(0), toByteOffset: 12, as: UInt32.self)
            return 16
        case .fanotify:
            // struct fanotify_event_metadata: event_len, vers, reserved, metadata_len, mask, fd
            // (FAN_NOFD), pid; no information records.
            buffer.storeBytes(of: UInt32(24), toByteOffset: 0, as: UInt32.self)
            buffer.storeBytes(of: UInt8(3), toByteOffset: 4, as: UInt8.self)
            buffer.storeBytes(of: UInt8(0), toByteOffset: 5, as: UInt8.self)
            buffer.storeBytes(of: UInt16(24), toByteOffset: 6, as: UInt16.self)
            buffer.storeBytes(of: UInt64(0x4000), toByteOffset: 8, as: UInt64.self)
            buffer.storeBytes(of: Int32(-1), toByteOffset: 16, as: Int32.self)
            buffer.storeBytes(of: Int32(0), toByteOffset: 20, as: Int32.self)
            return 24
        }
    }
}

/// Something to do once, just before the library first lists the directory at a path
/// (``SystemCalls/listing(_:)``): on the loop's thread, after a tree's walk has watched that
/// directory (or read its handle) and before it reads its entries.
final class BeforeListing: @unchecked Sendable {
    private let armed = LockedValue<(path: String, action: @Sendable () -> Void)?>(nil)

    /// Runs `action` before the next listing of the directory at `path`.
    func arm(_ path: String, _ action: @escaping @Sendable () -> Void) { armed.set((path, action)) }

    /// Whether the action is still to run.
    var isArmed: Bool { armed.get() != nil }

    /// Runs the action if `fd` is the directory it waits for.
    fileprivate func strike(_ fd: Int32) {
        guard let path = armed.get()?.path,
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")) == path
        else { return }
        var action: (@Sendable () -> Void)?
        armed.update {
            action = $0?.action
            $0 = nil
        }
        action?()
    }
}

extension SystemCalls {
    /// This table, with `hook`'s action run before the first `getdents64` of the directory it
    /// waits for.
    func listing(_ hook: BeforeListing) -> SystemCalls {
        var calls = self
        let getdents64 = self.getdents64
        calls.getdents64 = { fd, buffer, count in
            if hook.isArmed { hook.strike(fd) }
            return getdents64(fd, buffer, count)
        }
        return calls
    }
}
