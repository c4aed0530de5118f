import Foundation
import XCTest

/// A running `dirwatch`, its stdout read line by line on another thread.
final class Run: @unchecked Sendable {
    private let process = Process()
    private let stdout = Pipe()
    private let stderr = Pipe()
    private let lock = NSCondition()
    private var lines: [String] = []
    /// When each of ``lines`` was read (monotonic nanoseconds).
    private var arrivals: [UInt64] = []
    private var partial = Data()
    private var stdoutClosed = false
    private var errors = Data()
    private var stderrClosed = false
    private var established = false

    struct TimedOut: Error, CustomStringConvertible {
        var what: String
        var description: String { "timed out waiting for \(what)" }
    }

    /// `environment`: variables set for dirwatch, over the test's own.
    init(_ binary: URL, _ arguments: [String], environment extra: [String: String] = [:]) throws {
        process.executableURL = binary
        process.arguments = arguments
        process.standardOutput = stdout
        process.standardError = stderr
        var environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }
        environment["NO_COLOR"] = "1"
        process.environment = environment
        try process.run()
        Thread.detachNewThread { [self] in readLoop(stdout.fileHandleForReading, isError: false) }
        Thread.detachNewThread { [self] in readLoop(stderr.fileHandleForReading, isError: true) }
    }

    private func readLoop(_ handle: FileHandle, isError: Bool) {
        while true {
            let chunk = handle.availableData
            lock.lock()
            if isError {
                errors.append(chunk)
                if String(decoding: errors, as: UTF8.self).contains("Watches established.\n") { established = true }
                if chunk.isEmpty { stderrClosed = true }
            } else {
                partial.append(chunk)
                while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: partial[partial.startIndex..<newline], as: UTF8.self))
                    arrivals.append(DispatchTime.now().uptimeNanoseconds)
                    partial = Data(partial[(newline + 1)...])
                }
                if chunk.isEmpty { stdoutClosed = true }
            }
            lock.broadcast()
            lock.unlock()
            if chunk.isEmpty { return }
        }
    }

    /// Waits for `condition` (checked under the lock) for up to 20 seconds.
    private func wait(for what: String, _ condition: () -> Bool) throws {
        lock.lock()
        defer { lock.unlock() }
        let deadline = Date(timeIntervalSinceNow: 20)
        while !condition() {
            guard lock.wait(until: deadline) else { throw TimedOut(what: what) }
        }
    }

    func waitUntilEstablished() throws {
        do {
            try wait(for: "Watches established.") { established || stderrClosed }
        } catch {
            XCTFail("dirwatch never said Watches established.")
            throw error
        }
        let ready = lock.withLock { established }  // written by the reader thread
        XCTAssertTrue(ready, "dirwatch ended before it was ready: \(errorOutput())")
    }

    func nextLine() throws -> String {
        do {
            try wait(for: "a line") { !lines.isEmpty || stdoutClosed }
        } catch {
            XCTFail("no line from dirwatch")
            throw error
        }
        lock.lock()
        defer { lock.unlock() }
        guard !lines.isEmpty else {
            XCTFail("dirwatch closed stdout: \(String(decoding: errors, as: UTF8.self))")
            return ""
        }
        lastArrival = arrivals.removeFirst()
        return lines.removeFirst()
    }

    /// When the line ``nextLine()`` last returned was read (monotonic nanoseconds).
    private(set) var lastArrival: UInt64 = 0

    /// Lines read and not yet taken.
    var waitingLines: Int { lock.withLock { lines.count } }

    func nextJSON() throws -> NSDictionary {
        let line = try nextLine()
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? NSDictionary, line)
    }

    var pid: Int32 { process.processIdentifier }

    func interrupt() { kill(process.processIdentifier, SIGINT) }
    /// Stops the process as a shell's ^Z does (SIGSTOP), and lets it go on (SIGCONT).
    func pause() { kill(process.processIdentifier, SIGSTOP) }
    func resume() { kill(process.processIdentifier, SIGCONT) }
    func terminate() { kill(process.processIdentifier, SIGTERM) }
    /// A crash, as far as the process can tell: no handler runs.
    func killNow() { kill(process.processIdentifier, SIGKILL) }

    /// Its exit status. A dirwatch that has not closed its output 20 s on is killed, and the test
    /// fails rather than hangs.
    func waitForExit() throws -> Int32 {
        do {
            try wait(for: "stdout to close") { stdoutClosed }
        } catch {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw error
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Every whole line read and not yet taken (a line cut by the process's death is left out).
    func takeLines() -> [String] {
        lock.withLock {
            defer {
                lines = []
                arrivals = []
            }
            return lines
        }
    }

    func remainingOutput() -> String {
        lock.lock()
        defer { lock.unlock() }
        return lines.joined(separator: "\n") + String(decoding: partial, as: UTF8.self)
    }

    /// What dirwatch has written to stderr so far, without waiting for more: what it says before
    /// "Watches established." is all there once ``waitUntilEstablished()`` returns.
    func errorsSoFar() -> String {
        lock.withLock { String(decoding: errors, as: UTF8.self) }
    }

    func errorOutput() -> String {
        _ = try? wait(for: "stderr to close") { stderrClosed }
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: errors, as: UTF8.self)
    }
}

/// An integer shared with a timer's queue.
final class LockedCount: @unchecked Sendable {
    private let lock = NSLock()
    private var total = 0
    var value: Int { lock.withLock { total } }
    func add(_ amount: Int) { lock.withLock { total += amount } }
}
