import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// fsnotify's script corpus, run against this library. See MAPPING.md next to this file.
final class FsnotifyConformanceTests: XCTestCase {
    /// `<package root>/../shared/conformance/fsnotify`, found from this file's path.
    static var corpus: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // Conformance
            .deletingLastPathComponent()  // DirectoryWatcherTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // the package root
            .appendingPathComponent("../shared/conformance/fsnotify")
            .standardizedFileURL
    }

    /// The scripts, by name (`watch-dir/rename-file`), sorted.
    static func scripts(in corpus: URL) throws -> [(name: String, url: URL)] {
        var found: [(String, URL)] = []
        let folders = try FileManager.default.contentsOfDirectory(atPath: corpus.path).sorted()
        for folder in folders {
            let folderURL = corpus.appendingPathComponent(folder)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folderURL.path, isDirectory: &isDirectory),
                isDirectory.boolValue
            else { continue }
            for file in try FileManager.default.contentsOfDirectory(atPath: folderURL.path).sorted() {
                found.append(("\(folder)/\(file)", folderURL.appendingPathComponent(file)))
            }
        }
        return found
    }

    /// Every script; trees through fanotify (the tests run as root).
    func testFsnotifyScripts() throws {
        try run(label: "fsnotify conformance", backend: .automatic) { _ in true }
    }

    /// The recursive scripts again, their trees through inotify.
    func testFsnotifyRecursiveScriptsThroughInotify() throws {
        try run(label: "fsnotify conformance, watch-recurse through inotify", backend: .inotify) {
            $0.hasPrefix("watch-recurse/")
        }
    }

    private func run(label: String, backend: DirectoryWatcher.Backend, selecting: (String) -> Bool) throws {
        let corpus = Self.corpus
        guard FileManager.default.fileExists(atPath: corpus.path) else {
            print("fsnotify conformance: corpus not found at <package root>/../shared/conformance/fsnotify; skipped")
            throw XCTSkip("fsnotify corpus not found at <package root>/../shared/conformance/fsnotify")
        }
        var passed = 0
        var failed: [String] = []
        var skipped: [String] = []
        var differing: [String] = []
        for (name, url) in try Self.scripts(in: corpus) where selecting(name) {
            let script: FsnotifyScript
            do {
                script = try FsnotifyScript(name: name, text: try String(contentsOf: url, encoding: .utf8))
            } catch {
                failed.append(name)
                XCTFail("\(name): cannot parse: \(error)")
                continue
            }
            switch FsnotifyRunner(script, backend: backend).run() {
            case .skipped(let reason):
                skipped.append("\(name): \(reason)")
            case .failed(let message):
                failed.append(name)
                XCTFail("\(name): \(message)")
            case .finished(let have):
                let want = script.expectedOnLinux
                let difference = FsnotifyExceptions.differences[name]
                if let difference {
                    if have.sorted() == difference.expected.sorted() {
                        passed += 1
                        differing.append(name)
                    } else {
                        failed.append(name)
                        let note =
                            have.sorted() == want.sorted()
                            ? "now matches fsnotify: remove its entry from FsnotifyExceptions.differences"
                            : "differs from its documented difference"
                        XCTFail("\(name): \(note)\n\(Self.diff(have: have, want: difference.expected))")
                    }
                } else if have.sorted() == want.sorted() {
                    passed += 1
                } else {
                    failed.append(name)
                    XCTFail("\(name):\n\(Self.diff(have: have, want: want))")
                }
            }
        }
        for line in skipped { print("  skipped \(line)") }
        for name in differing { print("  passed with a documented difference (MAPPING.md): \(name)") }
        print("\(label): \(passed) passed, \(failed.count) failed, \(skipped.count) skipped")
    }

    /// Both lists sorted, as fsnotify compares them, line by line: `-` only wanted, `+` only had.
    static func diff(have: [FsnotifyEvent], want: [FsnotifyEvent]) -> String {
        var remaining = have.sorted()
        var lines: [String] = []
        for event in want.sorted() {
            if let index = remaining.firstIndex(of: event) {
                remaining.remove(at: index)
                lines.append("      \(event)")
            } else {
                lines.append("    - \(event)")
            }
        }
        lines += remaining.map { "    + \($0)" }
        return "  have (+) against want (-):\n" + lines.joined(separator: "\n")
    }
}
