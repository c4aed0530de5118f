import Foundation
import XCTest

/// The source tree shows the architecture: one folder per layer, and no layer uses one above it.
/// Architecture.md's table lists the same order; this test keeps the two true of each other.
final class LayerTests: XCTestCase {
    /// Bottom to top: a folder may use the types of the folders before it, never of those after.
    static let order = ["Support", "Model", "Syscalls", "WatchTable", "Backends", "Pipeline", "EventLoop", "FrontEnds"]

    private static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/DirectoryWatcher")

    func testEveryFolderIsALayer() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.sources.path).sorted()
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

    /// The folder's Swift code without comments and string literals.
    private static func code(of folder: String) throws -> String {
        let directory = sources.appendingPathComponent(folder)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasSuffix(".swift")
        }
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
