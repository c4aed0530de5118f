/// git's ignore rules (gitignore(5)), read as git reads them: what ``DirectoryWatcher/Options/gitignore``
/// leaves out of a watch. Pure: no system call here; the router reads the files and hands their
/// bytes over. Checked against `git check-ignore` itself, on generated trees and on hand-written
/// cases (`GitIgnoreTests`).
///
/// Paths are relative to the top of the work tree (the directory that holds `.git`), bytes
/// without a leading or trailing slash; the top itself is the empty path.
struct GitIgnores: Sendable, Equatable {
    static func == (lhs: GitIgnores, rhs: GitIgnores) -> Bool {
        lhs.directories == rhs.directories && lhs.everywhere == rhs.everywhere
    }

    /// Each directory's `.gitignore`, by the directory's path: a deeper file's patterns come first.
    var directories: [[UInt8]: GitIgnoreList] = [:] {
        didSet { deepestFirst = directories.sorted { $0.key.count > $1.key.count }.map { ($0.key, $0.value) } }
    }
    /// The same, the deepest directory first: a path's lists are found by comparing bytes, with no
    /// key to make per change.
    private var deepestFirst: [(directory: [UInt8], list: GitIgnoreList)] = []
    /// The files that apply everywhere, first to last in precedence: `.git/info/exclude`, then the
    /// user's global excludes file (`core.excludesFile`).
    var everywhere: [GitIgnoreList] = []

    /// Whether git ignores the entry at `path`. With `ancestors`, each directory above it is
    /// checked first, as git does (nothing below an ignored directory can be included again);
    /// without, they are taken to be included (a directory the watcher walked, under the same
    /// rules).
    func isIgnored(_ path: ArraySlice<UInt8>, isDirectory: Bool, ancestors: Bool = true) -> Bool {
        if ancestors {
            var index = path.startIndex
            while let slash = path[index...].firstIndex(of: UInt8(ascii: "/")) {
                if verdict(path[..<slash], isDirectory: true) == true { return true }
                index = slash + 1
            }
        }
        return verdict(path, isDirectory: isDirectory) == true
    }

    /// The last pattern that matches `path`, from the deepest list to the widest: true when it
    /// ignores, false when it includes again (`!`), nil when none matches.
    func verdict(_ path: ArraySlice<UInt8>, isDirectory: Bool) -> Bool? {
        for (directory, list) in deepestFirst {
            let below: ArraySlice<UInt8>
            if directory.isEmpty {
                below = path
            } else {
                // A directory above the entry: its path, then a slash.
                guard path.count > directory.count + 1,
                    path[path.startIndex + directory.count] == UInt8(ascii: "/"), path.starts(with: directory)
                else { continue }
                below = path[(path.startIndex + directory.count + 1)...]
            }
            if let verdict = list.verdict(below: below, isDirectory: isDirectory) { return verdict }
        }
        for list in everywhere {
            if let verdict = list.verdict(below: path, isDirectory: isDirectory) { return verdict }
        }
        return nil
    }
}

/// The patterns of one ignore file, and the directory they apply below.
struct GitIgnoreList: Sendable, Equatable {
    struct Pattern: Sendable, Equatable {
        /// Without its `!`, its leading `/` or its trailing `/`.
        let glob: [UInt8]
        /// `!`: what it matches is included again.
        let includes: Bool
        /// A trailing `/`: it matches directories only.
        let directoriesOnly: Bool
        /// No `/` but a trailing one: it matches a name at any depth; otherwise a path below the
        /// list's directory.
        let matchesName: Bool
        /// How it is matched: most patterns are a name (`build`) or an ending (`*.log`), told by
        /// comparing bytes, as git does; the others by ``Wildmatch``.
        let form: Form

        enum Form: Sendable, Equatable {
            case literal
            /// `*` then what the name ends with.
            case ending([UInt8])
            case glob
        }

        init(glob: [UInt8], includes: Bool, directoriesOnly: Bool, matchesName: Bool) {
            self.glob = glob
            self.includes = includes
            self.directoriesOnly = directoriesOnly
            self.matchesName = matchesName
            let special: (UInt8) -> Bool = {
                $0 == UInt8(ascii: "*") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "[")
                    || $0 == UInt8(ascii: "\\")
            }
            if !glob.contains(where: special) {
                form = .literal
            } else if matchesName, glob.first == UInt8(ascii: "*"), !glob.dropFirst().contains(where: special) {
                form = .ending(Array(glob.dropFirst()))
            } else {
                form = .glob
            }
        }

        /// Whether it matches `text`: a name, or a path below the list's directory.
        func matches(_ text: ArraySlice<UInt8>) -> Bool {
            switch form {
            case .literal: return text.elementsEqual(glob)
            case .ending(let ending):
                return text.count >= ending.count && text.suffix(ending.count).elementsEqual(ending)
            case .glob: return Wildmatch.matches(glob, text, pathname: !matchesName)
            }
        }
    }

    let patterns: [Pattern]

    /// Parses a file as git does: a line per pattern; blank lines and those that begin with `#`
    /// are none; trailing spaces go unless escaped with a backslash; `\#` and `\!` begin a
    /// pattern with that character.
    init(parsing contents: [UInt8]) {
        var patterns: [Pattern] = []
        for rawLine in contents.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            var line = rawLine
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            guard let first = line.first, first != UInt8(ascii: "#") else { continue }
            line = Self.trimmingTrailingSpaces(line)
            var includes = false
            if line.first == UInt8(ascii: "!") {
                includes = true
                line = line.dropFirst()
            }
            var directoriesOnly = false
            if line.last == UInt8(ascii: "/") {
                directoriesOnly = true
                line = line.dropLast()
            }
            guard !line.isEmpty else { continue }
            let matchesName = !line.contains(UInt8(ascii: "/"))
            if line.first == UInt8(ascii: "/") { line = line.dropFirst() }
            guard !line.isEmpty else { continue }
            patterns.append(
                Pattern(
                    glob: Array(line), includes: includes, directoriesOnly: directoriesOnly, matchesName: matchesName))
        }
        self.patterns = patterns
    }

    /// git's trim_trailing_spaces: spaces at the end go, unless the first of them is escaped.
    private static func trimmingTrailingSpaces(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var firstTrailingSpace: Int?
        var index = line.startIndex
        while index < line.endIndex {
            switch line[index] {
            case UInt8(ascii: " "):
                if firstTrailingSpace == nil { firstTrailingSpace = index }
            case UInt8(ascii: "\\"):
                index += 1
                if index == line.endIndex { return line }
                firstTrailingSpace = nil
            default:
                firstTrailingSpace = nil
            }
            index += 1
        }
        return firstTrailingSpace.map { line[..<$0] } ?? line
    }

    /// The verdict of the last pattern that matches the entry at `below`, its path relative to
    /// the directory the file applies below: true when it ignores, false when it includes again,
    /// nil when none matches.
    func verdict(below path: ArraySlice<UInt8>, isDirectory: Bool) -> Bool? {
        let nameStart = path.lastIndex(of: UInt8(ascii: "/")).map { $0 + 1 } ?? path.startIndex
        for pattern in patterns.reversed() {
            if pattern.directoriesOnly && !isDirectory { continue }
            if pattern.matches(pattern.matchesName ? path[nameStart...] : path) { return !pattern.includes }
        }
        return nil
    }
}

/// git's wildmatch: `*`, `?`, bracket expressions (ranges, `!` or `^` to negate, `[:class:]`),
/// backslash escapes, and, matching a path, `**` between slashes for any number of directories.
/// With `pathname`, `*`, `?` and brackets never match a slash.
enum Wildmatch {
    static func matches(_ pattern: [UInt8], _ text: ArraySlice<UInt8>, pathname: Bool) -> Bool {
        pattern.withUnsafeBufferPointer { p in
            text.withUnsafeBufferPointer { t in match(p, 0, t, 0, pathname: pathname) == .match }
        }
    }

    private enum Result { case match, noMatch, abortAll, abortToStarStar }

    private static let slash = UInt8(ascii: "/")

    private static func isGlobSpecial(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "*") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "[")
            || byte == UInt8(ascii: "\\")
    }

    // Indices past the end read as 0, as the C strings git matches end.
    private static func at(_ bytes: UnsafeBufferPointer<UInt8>, _ index: Int) -> UInt8 {
        index < bytes.count ? bytes[index] : 0
    }

    private static func match(
        _ p: UnsafeBufferPointer<UInt8>, _ start: Int, _ t: UnsafeBufferPointer<UInt8>, _ textStart: Int, pathname: Bool
    ) -> Result {
        var pi = start
        var ti = textStart
        while pi < p.count {
            var pc = p[pi]
            var tc = at(t, ti)
            if ti >= t.count && pc != UInt8(ascii: "*") { return .abortAll }
            switch pc {
            case UInt8(ascii: "?"):
                if pathname && tc == slash { return .noMatch }
            case UInt8(ascii: "*"):
                let matchSlash: Bool
                pi += 1
                if at(p, pi) == UInt8(ascii: "*") {
                    let before = pi - 2
                    while at(p, pi) == UInt8(ascii: "*") { pi += 1 }
                    let next = at(p, pi)
                    if (before < 0 || p[before] == slash)
                        && (pi >= p.count || next == slash || (next == UInt8(ascii: "\\") && at(p, pi + 1) == slash))
                    {
                        // `**/`: no directory at all, or any number of them.
                        if next == slash, match(p, pi + 1, t, ti, pathname: pathname) == .match { return .match }
                        matchSlash = true
                    } else {
                        matchSlash = !pathname
                    }
                } else {
                    matchSlash = !pathname
                }
                if pi >= p.count {
                    // A trailing `**` matches the rest; a trailing `*`, the rest of this name.
                    if !matchSlash && t[min(ti, t.count)...].contains(slash) { return .noMatch }
                    return .match
                } else if !matchSlash && p[pi] == slash {
                    // One `*` then a slash: the rest of this name.
                    guard let next = t[min(ti, t.count)...].firstIndex(of: slash) else { return .noMatch }
                    ti = next
                    break
                }
                while true {
                    if ti >= t.count { break }
                    if !isGlobSpecial(p[pi]) {
                        // What comes before the literal after the star is the star's.
                        let literal = p[pi]
                        while ti < t.count && (matchSlash || t[ti] != slash) {
                            if t[ti] == literal { break }
                            ti += 1
                        }
                        if at(t, ti) != literal || ti >= t.count { return .noMatch }
                    }
                    tc = t[ti]
                    let matched = match(p, pi, t, ti, pathname: pathname)
                    if matched != .noMatch {
                        if !matchSlash || matched != .abortToStarStar { return matched }
                    } else if !matchSlash && tc == slash {
                        return .abortToStarStar
                    }
                    ti += 1
                }
                return .abortAll
            case UInt8(ascii: "["):
                pi += 1
                pc = at(p, pi)
                if pc == UInt8(ascii: "^") { pc = UInt8(ascii: "!") }
                let negated = pc == UInt8(ascii: "!")
                if negated {
                    pi += 1
                    pc = at(p, pi)
                }
                var previous: UInt8 = 0
                var matched = false
                repeat {
                    if pc == 0 { return .abortAll }
                    if pc == UInt8(ascii: "\\") {
                        pi += 1
                        pc = at(p, pi)
                        if pc == 0 { return .abortAll }
                        if tc == pc { matched = true }
                    } else if pc == UInt8(ascii: "-") && previous != 0 && at(p, pi + 1) != 0
                        && at(p, pi + 1) != UInt8(ascii: "]")
                    {
                        pi += 1
                        pc = p[pi]
                        if pc == UInt8(ascii: "\\") {
                            pi += 1
                            pc = at(p, pi)
                            if pc == 0 { return .abortAll }
                        }
                        if tc <= pc && tc >= previous { matched = true }
                        pc = 0  // so that `previous` is 0 next
                    } else if pc == UInt8(ascii: "[") && at(p, pi + 1) == UInt8(ascii: ":") {
                        let nameStart = pi + 2
                        var end = nameStart
                        while end < p.count && p[end] != UInt8(ascii: "]") { end += 1 }
                        if end >= p.count { return .abortAll }
                        if end - nameStart < 1 || p[end - 1] != UInt8(ascii: ":") {
                            // No class after all: a literal `[`.
                            if tc == UInt8(ascii: "[") { matched = true }
                        } else {
                            guard let isIn = characterClass(Array(p[nameStart..<(end - 1)])[...]) else {
                                return .abortAll
                            }
                            if isIn(tc) { matched = true }
                            pi = end
                            pc = 0
                        }
                    } else if tc == pc {
                        matched = true
                    }
                    previous = pc
                    pi += 1
                    pc = at(p, pi)
                } while pc != UInt8(ascii: "]")
                if matched == negated || (pathname && tc == slash) { return .noMatch }
            case UInt8(ascii: "\\"):
                pi += 1
                pc = at(p, pi)
                if tc != pc { return .noMatch }
            default:
                if tc != pc { return .noMatch }
            }
            pi += 1
            ti += 1
        }
        return ti >= t.count ? .match : .noMatch
    }

    private static func characterClass(_ name: ArraySlice<UInt8>) -> ((UInt8) -> Bool)? {
        func isAlpha(_ c: UInt8) -> Bool { (c >= 65 && c <= 90) || (c >= 97 && c <= 122) }
        func isDigit(_ c: UInt8) -> Bool { c >= 48 && c <= 57 }
        switch String(decoding: name, as: UTF8.self) {
        case "alnum": return { isAlpha($0) || isDigit($0) }
        case "alpha": return isAlpha
        case "blank": return { $0 == 32 || $0 == 9 }
        case "cntrl": return { $0 < 32 || $0 == 127 }
        case "digit": return isDigit
        case "graph": return { $0 > 32 && $0 < 127 }
        case "lower": return { $0 >= 97 && $0 <= 122 }
        case "print": return { $0 >= 32 && $0 < 127 }
        case "punct": return { $0 > 32 && $0 < 127 && !isAlpha($0) && !isDigit($0) }
        case "space": return { $0 == 32 || ($0 >= 9 && $0 <= 13) }
        case "upper": return { $0 >= 65 && $0 <= 90 }
        case "xdigit": return { isDigit($0) || ($0 >= 65 && $0 <= 70) || ($0 >= 97 && $0 <= 102) }
        default: return nil
        }
    }
}
