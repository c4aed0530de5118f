import DirectoryWatcher

/// Checks that `changes` are exactly `expected`, in order, and otherwise fails the test (XCTest's
/// or Swift Testing's) with both lists side by side: each change matched, missing (`-`) or not
/// expected (`+`), its paths relative to `root`.
///
/// ```swift
/// assertChanges(changes, [.created("a.txt"), .renamed("a.txt", to: "b.txt")], under: folder.path)
/// ```
///
/// - Returns: Whether they matched.
@discardableResult
public func assertChanges(
    _ changes: [DirectoryChange], _ expected: [ExpectedChange], under root: String,
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
) -> Bool {
    let report = ChangeComparison(changes, expected, under: root)
    if !report.matches { CallSite(fileID: fileID, filePath: filePath, line: line, column: column).fail(report.text) }
    return report.matches
}

/// As ``assertChanges(_:_:under:fileID:filePath:line:column:)-(_,_,String,_,_,_,_)``, with the watcher's own directory as the root.
@discardableResult
public func assertChanges(
    _ changes: [DirectoryChange], _ expected: [ExpectedChange], under watcher: DirectoryWatcher,
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
) -> Bool {
    assertChanges(
        changes, expected, under: watcher.path.description, fileID: fileID, filePath: filePath, line: line,
        column: column)
}

/// Checks that every one of `expected` is among `changes`, in that order, with anything else
/// around them allowed: for a test that does not care what else a change brought (an editor's
/// temporary files, a directory's own modification).
@discardableResult
public func assertChanges(
    _ changes: [DirectoryChange], contain expected: [ExpectedChange], under root: String,
    fileID: String = #fileID, filePath: StaticString = #filePath, line: UInt = #line, column: UInt = #column
) -> Bool {
    let report = ChangeComparison(changes, expected, under: root)
    if !report.containsExpected {
        CallSite(fileID: fileID, filePath: filePath, line: line, column: column).fail(report.text)
    }
    return report.containsExpected
}

/// The two lists aligned (the longest run of matches, in order), for the failure's text.
struct ChangeComparison {
    enum Line {
        case matched(String)
        case missing(String)
        case unexpected(String)
    }

    let lines: [Line]

    init(_ changes: [DirectoryChange], _ expected: [ExpectedChange], under root: String) {
        // The longest common subsequence, by `matches`: a table of suffix lengths.
        let (n, m) = (expected.count, changes.count)
        var table = Array(repeating: Array(repeating: 0, count: m + 1), count: n + 1)
        for i in stride(from: n - 1, through: 0, by: -1) {
            for j in stride(from: m - 1, through: 0, by: -1) {
                table[i][j] =
                    expected[i].matches(changes[j], under: root)
                    ? table[i + 1][j + 1] + 1 : max(table[i + 1][j], table[i][j + 1])
            }
        }
        var lines: [Line] = []
        var (i, j) = (0, 0)
        while i < n || j < m {
            if i < n, j < m, expected[i].matches(changes[j], under: root) {
                lines.append(.matched(ExpectedChange.describing(changes[j], under: root)))
                i += 1
                j += 1
            } else if i < n, j == m || table[i + 1][j] >= table[i][j + 1] {
                lines.append(.missing(expected[i].description))
                i += 1
            } else {
                lines.append(.unexpected(ExpectedChange.describing(changes[j], under: root)))
                j += 1
            }
        }
        self.lines = lines
        self.root = root
    }

    let root: String

    var matches: Bool {
        lines.allSatisfy {
            if case .matched = $0 { return true }
            return false
        }
    }

    var containsExpected: Bool {
        lines.allSatisfy {
            if case .missing = $0 { return false }
            return true
        }
    }

    var text: String {
        let body = lines.map { line -> String in
            switch line {
            case .matched(let text): return "    \(text)"
            case .missing(let text): return "  - \(text)    (expected, not delivered)"
            case .unexpected(let text): return "  + \(text)    (delivered, not expected)"
            }
        }
        return "the changes under \(root) differ from those expected:\n"
            + (body.isEmpty ? "  (none either way)" : body.joined(separator: "\n"))
    }
}
