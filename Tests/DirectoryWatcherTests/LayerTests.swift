import Foundation
import XCTest

/// The source tree shows the architecture: one folder per layer, and no layer uses one above it.
/// Architecture.md's table lists the same order; this test keeps the two true of each other.
final class LayerTests: XCTestCase {
    /// Bottom to top: a folder may use the types of the folders before it, never of those after.
    static let order = [
        "Support", "Model", "Syscalls", "Backends", "WatchTable", "Pipeline", "SavedState", "EventLoop", "FrontEnds",
    ]

    /// The backends whose types the router still names: polling's routing is still the router's
    /// (`Router+Polling`), behind no protocol yet. Every other backend's folder (inotify's, behind
    /// ``DirectoryWatchBackend``; fanotify's, behind ``FileSystemMarkBackend``) it must not name,
    /// nor the watch table.
    static let backendsStillInTheRouter: Set<String> = ["Polling"]

    private static let sourcesFolder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/DirectoryWatcher")

    func testEveryFolderIsALayer() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.sourcesFolder.path).sorted()
        XCTAssertEqual(folders, Self.order.sorted(), "a new folder needs its place in `order` and in Architecture.md")
    }

    func testNoLayerUsesALayerAboveIt() throws {
        let code = try Self.order.map { try Self.code(of: $0) }
        let declared = code.map(Self.topLevelTypes)
        for (lower, text) in code.enumerated() {
            for higher in (lower + 1)..<Self.order.count {
                for name in declared[higher] where text.range(of: "\\b\(name)\\b", options: .regularExpression) != nil {
                    XCTFail("\(Self.order[lower]) uses \(name) of \(Self.order[higher]), a layer above it")
                }
            }
        }
    }

    /// Members a layer adds to a lower layer's type (an extension of `System` with a backend's
    /// calls, of `Router` in the pipeline) are used by that layer and those above it only: a
    /// lower layer calling one uses the higher layer through the type's name, which the test
    /// above cannot see. Names the lower layers declare themselves are left out (a call of one
    /// cannot be told from a call of the other by its name).
    func testNoLayerUsesAMemberALayerAboveItAdds() throws {
        let code = try Self.order.map { try Self.code(of: $0) }
        let declared = code.map(Self.topLevelTypes)
        let members = code.map(Self.declaredMembers)
        for higher in Self.order.indices {
            let lowerTypes = Set(declared[..<higher].joined())
            for (type, added) in Self.extensionMembers(in: code[higher]) where lowerTypes.contains(type) {
                for lower in 0..<higher {
                    let own = Set(members[...lower].joined())
                    for name in added where !own.contains(name) {
                        if code[lower].range(of: "\\.\(name)\\b", options: .regularExpression) != nil {
                            XCTFail("\(Self.order[lower]) uses \(type).\(name), which \(Self.order[higher]) adds")
                        }
                    }
                }
            }
        }
    }

    /// Each `extension Type` of the code, with the names of the functions and properties it
    /// declares.
    private static func extensionMembers(in code: String) -> [(String, [String])] {
        let regex = try! NSRegularExpression(pattern: "(?m)^extension (\\w+)[^{]*\\{")
        let text = code as NSString
        var result: [(String, [String])] = []
        for match in regex.matches(in: code, range: NSRange(location: 0, length: text.length)) {
            let type = text.substring(with: match.range(at: 1))
            // The extension's body: to the first line that closes it at the start of a line.
            let start = match.range.location + match.range.length
            let rest = text.substring(from: start)
            let body = rest.range(of: "\n}").map { String(rest[..<$0.lowerBound]) } ?? rest
            result.append((type, extensionLevelMembers(in: body)))
        }
        return result
    }

    /// The names of the functions and properties an extension's body declares at its own level
    /// (not those local to a function).
    private static func extensionLevelMembers(in body: String) -> [String] {
        let pattern =
            "(?m)^    (?:(?:public|private|fileprivate|internal|static|mutating|nonisolated|@\\w+(?:\\([^)]*\\))?) )*(?:func|var|let) (\\w+)"
        let regex = try! NSRegularExpression(pattern: pattern)
        let text = body as NSString
        return regex.matches(in: body, range: NSRange(location: 0, length: text.length)).map {
            text.substring(with: $0.range(at: 1))
        }
    }

    /// The names of the functions and properties declared in the code, at any depth.
    private static func declaredMembers(in code: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: "\\b(?:func|var|let) (\\w+)")
        let text = code as NSString
        return regex.matches(in: code, range: NSRange(location: 0, length: text.length)).map {
            text.substring(with: $0.range(at: 1))
        }
    }

    /// The tests are in folders as the sources are (a layer's, a backend's), beside the stress
    /// suite, the fsnotify corpus's run and what the tests share.
    func testTheTestsMirrorTheSources() throws {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let folders = try FileManager.default.contentsOfDirectory(atPath: tests.path).filter { !$0.hasSuffix(".swift") }
        XCTAssertEqual(Set(folders), Set(Self.order).union(["Stress", "Conformance", "TestSupport"]))
        let backends = try FileManager.default.contentsOfDirectory(
            atPath: tests.appendingPathComponent("Backends").path
        ).filter { !$0.hasSuffix(".swift") }
        let sourceBackends = try FileManager.default.contentsOfDirectory(
            atPath: Self.sourcesFolder.appendingPathComponent("Backends").path
        ).filter { !$0.hasSuffix(".swift") }
        XCTAssertEqual(
            Set(backends), Set(sourceBackends).union(["InMemory"]), "the in-memory backend is the tests' own")
    }

    /// Each backend is a folder of `Backends/`, and the router and the watch table name none of
    /// their types (they reach a backend through ``DirectoryWatchBackend`` and ``BackendEvent``).
    func testTheRouterAndTheWatchTableNameNoBackend() throws {
        let backends = Self.sourcesFolder.appendingPathComponent("Backends")
        let folders = try FileManager.default.contentsOfDirectory(atPath: backends.path).filter {
            !$0.hasSuffix(".swift")
        }
        XCTAssertEqual(
            Set(folders), ["Inotify", "Fanotify", "Polling"], "a new backend needs its row in Architecture.md")
        for backend in folders {
            let declared = Self.topLevelTypes(in: try Self.code(of: "Backends/" + backend))
            XCTAssertFalse(declared.isEmpty, backend)
            var users = ["WatchTable"]
            if !Self.backendsStillInTheRouter.contains(backend) { users.append("Pipeline") }
            for user in users {
                let text = try Self.code(of: user)
                for name in declared where text.range(of: "\\b\(name)\\b", options: .regularExpression) != nil {
                    XCTFail("\(user) names \(name) of the \(backend) backend")
                }
            }
        }
    }

    /// The folder's Swift code, its subfolders' with it, without comments and string literals.
    private static func code(of folder: String) throws -> String {
        let directory = sourcesFolder.appendingPathComponent(folder)
        guard let walk = FileManager.default.enumerator(atPath: directory.path) else { return "" }
        let files = walk.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        return try files.map { file in
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            return text.replacingOccurrences(of: "//[^\n]*", with: "", options: .regularExpression)
                .replacingOccurrences(of: "\"[^\"\n]*\"", with: "\"\"", options: .regularExpression)
        }.joined(separator: "\n")
    }

    /// Types declared at the top level of a file (nested ones are reached through these).
    private static func topLevelTypes(in code: String) -> [String] {
        let pattern =
            "(?m)^(?:public |private |fileprivate |internal )?(?:final )?(?:class|struct|enum|protocol|actor) (\\w+)"
        let regex = try! NSRegularExpression(pattern: pattern)
        let range = NSRange(code.startIndex..., in: code)
        return regex.matches(in: code, range: range).compactMap {
            Range($0.range(at: 1), in: code).map { String(code[$0]) }
        }
    }
}
