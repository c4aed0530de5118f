import Glibc

/// What a watcher that leaves out what git ignores (``DirectoryWatcher/Options/gitignore``) knows
/// of git's rules: the files above its directory and those that apply everywhere, read when it
/// starts, and each watched directory's `.gitignore`, read when the directory is listed and again
/// when the file changes. Kept by directory descriptor, so that a rename of a directory takes its
/// rules along; assembled by path (``GitIgnores``) when asked after a change. Loop thread only,
/// but for its start (``load(root:system:environment:)``), made before it reaches the loop.
final class GitIgnoreState {
    /// The top of the work tree: the directory that holds `.git` (or the watched directory, when
    /// no directory above it does).
    let top: FileSystemPath
    /// The `.gitignore` files of the directories from the top down to the watched one's parent,
    /// by path relative to the top, and the files that apply everywhere.
    private let fixed: GitIgnores
    /// Each watched directory's `.gitignore`, by the directory's descriptor.
    private(set) var lists: [Int32: GitIgnoreList] = [:]
    /// Directories whose `.gitignore` changed when the path the tree knew them by led elsewhere
    /// (a rename still to be routed): read again after the next rename inside the tree.
    var unread: Set<Int32> = []
    private var assembled: GitIgnores?
    private var assembledEpoch = -1

    init(top: FileSystemPath, fixed: GitIgnores) {
        self.top = top
        self.fixed = fixed
    }

    /// The path below the top, without a leading slash; nil for the top itself and for a path
    /// outside it.
    func relative(_ path: FileSystemPath) -> ArraySlice<UInt8>? {
        let top = self.top.bytes
        let bytes = path.bytes
        if top == [UInt8(ascii: "/")] { return bytes.count > 1 ? bytes[1...] : nil }
        guard bytes.count > top.count + 1, bytes.starts(with: top), bytes[top.count] == UInt8(ascii: "/") else {
            return nil
        }
        return bytes[(top.count + 1)...]
    }

    /// Sets the `.gitignore` of the directory watched as `wd` (nil: it has none). Whether that
    /// changed anything.
    @discardableResult
    func set(_ list: GitIgnoreList?, for wd: Int32) -> Bool {
        guard lists[wd] != list else { return false }
        lists[wd] = list
        assembled = nil
        return true
    }

    /// Forgets a directory let go.
    func forget(_ wd: Int32) {
        if lists.removeValue(forKey: wd) != nil { assembled = nil }
        if !unread.isEmpty { unread.remove(wd) }
    }

    /// The rules by path, the watched directories at the paths `path(of:)` gives them now (nil
    /// for a directory no longer watched). `epoch` changes whenever those paths may have.
    func rules(epoch: Int, path: (Int32) -> FileSystemPath?) -> GitIgnores {
        if let assembled, assembledEpoch == epoch { return assembled }
        var rules = fixed
        for (wd, list) in lists {
            guard let directory = path(wd) else { continue }
            if directory == top {
                rules.directories[[]] = list
            } else if let relative = relative(directory) {
                rules.directories[Array(relative)] = list
            }
        }
        assembled = rules
        assembledEpoch = epoch
        return rules
    }

    // MARK: - Reading the rules at start

    /// The rules that apply to the watched directory `root` from outside it: the top of its work
    /// tree (found by looking for `.git` in it and above it), the `.gitignore` files between the
    /// top and `root`, the repository's `info/exclude` and the user's global excludes file, as
    /// git finds it (`core.excludesFile` in the user's and the repository's configuration, else
    /// `$XDG_CONFIG_HOME/git/ignore` or `~/.config/git/ignore`). A file that cannot be read
    /// counts as empty, as it does for git.
    static func load(
        root: FileSystemPath, recursive: Bool, system: System, environment: (String) -> String?
    ) -> GitIgnoreState {
        func read(_ path: FileSystemPath) -> [UInt8]? { (try? system.readFile(path)) ?? nil }
        var top = root
        var gitDirectory: FileSystemPath?
        var candidate = root
        while true {
            let dotGit = candidate.appending(bytes: Array(".git".utf8))
            do {
                if let contents = try system.readFile(dotGit) {
                    // A worktree's or a submodule's `.git` file: "gitdir: <path>".
                    let text = String(decoding: contents, as: UTF8.self)
                    if let line = text.split(separator: "\n").first, line.hasPrefix("gitdir:") {
                        let path = line.dropFirst("gitdir:".count).trimmingCharacters()
                        gitDirectory =
                            path.hasPrefix("/") ? FileSystemPath(path) : candidate.appending(bytes: Array(path.utf8))
                        top = candidate
                        break
                    }
                }
            } catch {
                if error.errno == EISDIR {
                    gitDirectory = dotGit
                    top = candidate
                    break
                }
            }
            let parent = candidate.parent
            if parent == candidate || candidate.bytes == [UInt8(ascii: "/")] { break }
            candidate = parent
        }
        var fixed = GitIgnores()
        if gitDirectory != nil {
            // The directories from the top down to the watched one's parent.
            var directory = root.parent
            while directory != top, directory.bytes.count > top.bytes.count {
                if let contents = read(directory.appending(bytes: Array(".gitignore".utf8))) {
                    let relative = Array(directory.bytes[(top.bytes.count + 1)...])
                    fixed.directories[relative] = GitIgnoreList(parsing: contents)
                }
                directory = directory.parent
            }
            if root != top, let contents = read(top.appending(bytes: Array(".gitignore".utf8))) {
                fixed.directories[[]] = GitIgnoreList(parsing: contents)
            }
        }
        if let gitDirectory {
            let exclude = gitDirectory.appending(bytes: Array("info/exclude".utf8))
            fixed.everywhere.append(GitIgnoreList(parsing: read(exclude) ?? []))
        }
        if let global = globalExcludesFile(gitDirectory: gitDirectory, environment: environment, read: read) {
            fixed.everywhere.append(GitIgnoreList(parsing: read(global) ?? []))
        }
        let state = GitIgnoreState(top: top, fixed: fixed)
        // A tree's walk reads its directories' files, the watched one's too.
        if !recursive, let contents = read(root.appending(bytes: Array(".gitignore".utf8))) {
            state.set(GitIgnoreList(parsing: contents), for: -1)
        }
        return state
    }

    /// The user's global excludes file: the last `core.excludesFile` of the configuration files
    /// git reads (the system's unless `GIT_CONFIG_NOSYSTEM`, the user's, the repository's), or
    /// the default.
    static func globalExcludesFile(
        gitDirectory: FileSystemPath?, environment: (String) -> String?, read: (FileSystemPath) -> [UInt8]?
    ) -> FileSystemPath? {
        let home = environment("HOME").flatMap { $0.isEmpty ? nil : $0 }
        let configHome =
            environment("XDG_CONFIG_HOME").flatMap { $0.isEmpty ? nil : $0 } ?? home.map { $0 + "/.config" }
        var configurations: [FileSystemPath] = []
        if environment("GIT_CONFIG_NOSYSTEM").map({ $0.isEmpty || $0 == "0" || $0 == "false" }) ?? true {
            configurations.append("/etc/gitconfig")
        }
        if let configHome { configurations.append(FileSystemPath(configHome + "/git/config")) }
        if let home { configurations.append(FileSystemPath(home + "/.gitconfig")) }
        if let gitDirectory { configurations.append(gitDirectory.appending(bytes: Array("config".utf8))) }
        var found: String?
        for configuration in configurations {
            if let contents = read(configuration), let value = excludesFile(inConfiguration: contents) {
                found = value
            }
        }
        if let found {
            if found.hasPrefix("~/"), let home { return FileSystemPath(home + found.dropFirst(1)) }
            return FileSystemPath(found)
        }
        return configHome.map { FileSystemPath($0 + "/git/ignore") }
    }

    /// The last `excludesFile` of the `[core]` section of a git configuration file; nil when none.
    static func excludesFile(inConfiguration contents: [UInt8]) -> String? {
        var inCore = false
        var found: String?
        for rawLine in String(decoding: contents, as: UTF8.self).split(separator: "\n") {
            let line = rawLine.trimmingCharacters()
            if line.hasPrefix("[") {
                let header = line.dropFirst().prefix { $0 != "]" }.trimmingCharacters()
                inCore = header.lowercased() == "core"
                continue
            }
            guard inCore, let equals = line.firstIndex(of: "=") else { continue }
            guard line[..<equals].trimmingCharacters().lowercased() == "excludesfile" else { continue }
            var value = ""
            var quoted = false
            var escaped = false
            for character in line[line.index(after: equals)...] {
                if escaped {
                    value.append(character)
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    quoted.toggle()
                } else if !quoted && (character == "#" || character == ";") {
                    break
                } else {
                    value.append(character)
                }
            }
            found = value.trimmingCharacters()
        }
        return found
    }
}

extension StringProtocol {
    /// Without the spaces and tabs at either end.
    fileprivate func trimmingCharacters() -> String {
        String(
            self.drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed().drop {
                $0 == " " || $0 == "\t" || $0 == "\r"
            }.reversed())
    }
}
