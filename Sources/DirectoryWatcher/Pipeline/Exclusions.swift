import Glibc

/// A watcher's excludes (``DirectoryWatcher/Options/excludes``): globs matched with fnmatch(3)
/// against an entry's name and against its path below the watched directory, so `*.tmp`, `.git`
/// and `build/*` all do what they look like.
///
/// The router applies them before anything costs: an excluded directory of a tree is never
/// watched or listed, and no change about an excluded entry is reported.
struct Exclusions: Sendable {
    let patterns: [String]

    /// Nil for no patterns: nothing to match, not even per change.
    init?(_ patterns: [String]) {
        guard !patterns.isEmpty else { return nil }
        self.patterns = patterns
    }

    /// Whether `path`, inside the watched directory `root`, is excluded. The root itself never is.
    func excludes(_ path: FileSystemPath, under root: FileSystemPath) -> Bool {
        guard path.bytes.count > root.bytes.count else { return false }
        let name = path.lastComponent
        var relative = path
        if path.bytes.count > root.bytes.count + 1, path.bytes.starts(with: root.bytes) {
            relative = FileSystemPath(bytes: path.bytes[(root.bytes.count + 1)...])
        }
        return patterns.contains { pattern in matches(pattern, name) || matches(pattern, relative) }
    }

    /// Whether a change is dropped: a rename only when both of its names are excluded; never the
    /// watch's own end or a notice of lost changes.
    func excludes(_ change: DirectoryChange, under root: FileSystemPath) -> Bool {
        switch change.kind {
        case .rootRemoved, .rootMoved, .overflow, .failed: return false
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
