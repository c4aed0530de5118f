import Foundation
import Testing

@testable import DirWatchCLI

/// What `--exec`'s stop reads of the processes below dirwatch.
@Suite struct ProcessTreeTests {
    @Test func testStatIsReadAfterTheLastParenthesisOfTheName() {
        func parse(_ line: String) -> ProcessTree.Stat? { ProcessTree.parseStat(ArraySlice(line.utf8)) }
        #expect(parse("123 (sh) S 45 120 120 0 -1") == .init(state: "S", parent: 45, group: 120))
        #expect(
            parse("7 (a) b (c) Z 1 7 7") == .init(state: "Z", parent: 1, group: 7),
            "a name with spaces and parentheses")
        #expect(parse("7 (x)) R 99 3") == .init(state: "R", parent: 99, group: 3))
        #expect(parse("7 (truncated") == nil)
        #expect(parse("7 (x) S 1") == nil)
        #expect(parse("7 (x) S parent 7") == nil)
    }

    /// A child that starts a grandchild in a session of its own: both are found, the child
    /// before the grandchild.
    @Test func testDescendantsFollowEveryGeneration() throws {
        let output = Pipe()
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sh")
        child.arguments = ["-c", #"setsid sh -c 'echo $$; exec sleep 1000' & exec sleep 1000"#]
        child.standardOutput = output
        try child.run()
        defer {
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
        }
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        let grandchild = try #require(pid_t(line.trimmingCharacters(in: .whitespacesAndNewlines)), "\(line)")
        defer { kill(grandchild, SIGKILL) }
        let found = ProcessTree.descendants(of: getpid()).map(\.pid)
        #expect(found.contains(child.processIdentifier))
        #expect(found.contains(grandchild))
        #expect(found.firstIndex(of: child.processIdentifier)! < found.firstIndex(of: grandchild)!)
        #expect(ProcessTree.descendants(of: child.processIdentifier) == [.init(pid: grandchild, group: grandchild)])
    }
}
