import DirectoryWatcher

/// A change a test expects, written as a person says it: `.created("a.txt")`,
/// `.renamed("draft.txt", to: "final.txt")`. Paths are relative to the watched directory (or
/// absolute). What is left out is not compared: whether the entry is a directory, whether the
/// change was found by a rescan, unless given.
public struct ExpectedChange: Hashable, Sendable, CustomStringConvertible {
    public var kind: DirectoryChange.Kind
    /// The entry's path, relative to the watched directory, or absolute.
    public var path: String
    /// A rename's or exchange's previous path; a move in's origin, when known. Nil: not compared.
    public var oldPath: String?
    /// Whether the entry is a directory. Nil: not compared.
    public var isDirectory: Bool?
    /// Whether a rescan found the change (`DirectoryChange/foundByRescan`). Nil: not compared.
    public var foundByRescan: Bool?

    public init(
        _ kind: DirectoryChange.Kind, _ path: String, oldPath: String? = nil, isDirectory: Bool? = nil,
        foundByRescan: Bool? = nil
    ) {
        self.kind = kind
        self.path = path
        self.oldPath = oldPath
        self.isDirectory = isDirectory
        self.foundByRescan = foundByRescan
    }

    public static func created(_ path: String, isDirectory: Bool? = nil, foundByRescan: Bool? = nil) -> Self {
        Self(.created, path, isDirectory: isDirectory, foundByRescan: foundByRescan)
    }
    public static func removed(_ path: String, isDirectory: Bool? = nil, foundByRescan: Bool? = nil) -> Self {
        Self(.removed, path, isDirectory: isDirectory, foundByRescan: foundByRescan)
    }
    public static func modified(_ path: String, foundByRescan: Bool? = nil) -> Self {
        Self(.modified, path, foundByRescan: foundByRescan)
    }
    public static func attributesChanged(_ path: String, foundByRescan: Bool? = nil) -> Self {
        Self(.attributesChanged, path, foundByRescan: foundByRescan)
    }
    public static func renamed(_ oldPath: String, to path: String, foundByRescan: Bool? = nil) -> Self {
        Self(.renamed, path, oldPath: oldPath, foundByRescan: foundByRescan)
    }
    public static func movedIn(_ path: String) -> Self { Self(.movedIn, path) }
    public static func movedOut(_ path: String) -> Self { Self(.movedOut, path) }
    /// The watched directory itself: its path is the watched directory's.
    public static var rootRemoved: Self { Self(.rootRemoved, "") }
    public static var rootMoved: Self { Self(.rootMoved, "") }
    /// Changes were lost from the kernel's queue (the rescan's findings follow it).
    public static var overflow: Self { Self(.overflow, "") }
    /// The directory at `path` could not be watched or listed.
    public static func failed(_ path: String) -> Self { Self(.failed, path) }

    public var description: String {
        var text = "\(kind.rawValue)"
        if let oldPath { text += " \(Self.shown(oldPath)) ->" }
        if !path.isEmpty || ![.overflow, .rootRemoved, .rootMoved].contains(kind) { text += " \(Self.shown(path))" }
        if isDirectory == true { text += " (directory)" }
        if foundByRescan == true { text += " (found by rescan)" }
        return text
    }

    static func shown(_ path: String) -> String { path.isEmpty ? "." : path }

    /// Whether `change`, seen by a watcher of `root`, is this one.
    func matches(_ change: DirectoryChange, under root: String) -> Bool {
        guard change.kind == kind, Self.relative(change.path.description, to: root) == Self.relative(path, to: root)
        else { return false }
        if let oldPath, Self.relative(change.oldPath?.description ?? "", to: root) != Self.relative(oldPath, to: root) {
            return false
        }
        if let isDirectory, change.isDirectory != isDirectory { return false }
        if let foundByRescan, change.foundByRescan != foundByRescan { return false }
        return true
    }

    /// `change` as a test would write it: its paths relative to `root`.
    static func describing(_ change: DirectoryChange, under root: String) -> String {
        var text = "\(change.kind.rawValue)"
        let path = relative(change.path.description, to: root)
        // The watch's own: the directory needs no name.
        if [.overflow, .rootRemoved, .rootMoved].contains(change.kind), path.isEmpty { return text }
        if let old = change.oldPath { text += " \(shown(relative(old.description, to: root))) ->" }
        text += " \(shown(path))"
        if change.isDirectory { text += " (directory)" }
        if change.foundByRescan { text += " (found by rescan)" }
        if let error = change.error { text += " (\(error.reason))" }
        return text
    }

    /// `path` relative to `root` when it is inside it; as it is otherwise.
    static func relative(_ path: String, to root: String) -> String {
        let root = root.hasSuffix("/") && root.count > 1 ? String(root.dropLast()) : root
        if path == root { return "" }
        if path.hasPrefix(root + "/") { return String(path.dropFirst(root.count + 1)) }
        if root == "/", path.hasPrefix("/") { return String(path.dropFirst()) }
        return path
    }
}
