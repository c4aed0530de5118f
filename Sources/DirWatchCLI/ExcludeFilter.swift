import DirectoryWatcher
import Glibc

/// `--exclude` globs, matched with fnmatch(3) against an entry's name and against its path below
/// the watched directory, so `*.tmp`, `.git` and `build/*` all do what they look like.
public struct ExcludeFilter: Sendable {
    public let patterns: [String]

    public init(_ patterns: [String]) {
        self.patterns = patterns
    }

    /// Whether `path`, inside the watched directory `root`, is excluded.
    public func excludes(_ path: FileSystemPath, under root: FileSystemPath) -> Bool {
        guard !patterns.isEmpty else { return false }
        let name = path.lastComponent
        var relative = path
        if path.bytes.count > root.bytes.count + 1, path.bytes.starts(with: root.bytes) {
            relative = FileSystemPath(bytes: path.bytes[(root.bytes.count + 1)...])
        }
        return patterns.contains { pattern in matches(pattern, name) || matches(pattern, relative) }
    }

    /// Whether a change is dropped: a rename only when both of its names are excluded.
    public func excludes(_ change: DirectoryChange, under root: FileSystemPath) -> Bool {
        switch change.kind {
        case .rootRemoved, .rootMoved, .overflow: return false
        default: break
        }
        guard excludes(change.path, under: root) else { return false }
        if change.kind == .renamed, let oldPath = change.oldPath { return excludes(oldPath, under: root) }
        return true
    }

    private func matches(_ pattern: String, _ path: FileSystemPath) -> Bool {
        path.withCString { fnmatch(pattern, $0, 0) == 0 }
    }
}
