import CDirectoryWatcherShims
import DirectoryWatcher

/// What the command line asks for.
public enum Invocation: Equatable, Sendable {
    case help
    case version
    /// `--completions SHELL`: print that shell's completion script.
    case completions(ShellCompletion)
    case watch(Options)
}

/// The options of a watch, parsed and checked.
public struct Options: Equatable, Sendable {
    /// The positional paths: directories, or regular files (watched as ``files`` are).
    public var paths: [String] = []
    /// Files watched by name through their directory (`--file`), so an atomic save keeps them watched.
    public var files: [String] = []
    /// The kinds of change printed (`--event`); rootRemoved, rootMoved, overflow and failed always are.
    public var events: DirectoryWatcher.Events = .default
    public var json = false
    public var recursive = false
    public var excludes: [String] = []
    /// Seconds of quiet before a batch is delivered; nil delivers at once.
    public var settle: Double?
    /// Poll every so many seconds at most instead of using inotify (`--poll`); nil lets the
    /// library choose (it polls network and shared file systems by itself).
    public var poll: Double?
    /// `--backend`: inotify or fanotify forced; nil lets the library choose (`--poll` polls).
    public var backend: DirectoryWatcher.Backend?
    /// With ``settle``: the longest a change waits, in seconds; nil for the library's default.
    public var settleMax: Double?
    /// With ``settle``: a write that left a file's bytes as they were is not printed.
    public var compareContent = false
    /// Leave out what git ignores (``DirectoryWatcher/Options/gitignore``).
    public var gitignore = false
    public var once = false
    /// The command to run after each batch, as argv; nil runs nothing.
    public var exec: [String]?
    public var restart = false
    /// With ``exec``: wait for the first change before running the command (`--postpone`); without
    /// it the command runs once at start, as entr and watchexec do. `--once` implies it.
    public var postpone = false
    /// With ``exec``: milliseconds during which changes are gathered into one run, from the first
    /// one on (`--debounce`); 0 runs as soon as a batch arrives.
    public var debounceMilliseconds = 50
    /// With ``exec``: seconds between the SIGTERM that stops a run and the SIGKILL that follows
    /// when it has not ended (`--grace`).
    public var grace = 5.0
    /// `--state`: the state file; nil keeps none.
    public var state: String?
    /// `--state-interval`: seconds between saves of ``state``.
    public var stateInterval = 60.0

    public init() {}
}

/// A command line that cannot be run as written: exit status 2, one line on stderr.
public struct UsageError: Error, Equatable, CustomStringConvertible {
    public var message: String
    public var description: String { "dirwatch: \(message) (see dirwatch --help)" }

    init(_ message: String) { self.message = message }
}

/// The longest --settle, --settle-max, --grace or --debounce taken: a million seconds (eleven days
/// and a half).
let maximumSeconds = 1_000_000.0

/// Parses `dirwatch`'s arguments (without the program name).
///
/// Options and paths mix freely; `--` ends the options; `--exec` takes every argument after it as
/// the command and its arguments, so it comes last. An option is known by its entry in
/// ``OptionDescriptor/table``, which says whether it takes a value and whether it needs `--exec`.
public func parseArguments(_ arguments: [String]) throws(UsageError) -> Invocation {
    var options = Options()
    var index = 0
    var optionsEnded = false
    // Nil until the first --event: then only what the lists name, not the defaults as well.
    var events: DirectoryWatcher.Events?
    // The options that only mean something with --exec, as given, to refuse them without it.
    var execOnly: [String] = []
    var stateIntervalGiven = false

    func value(for option: String) throws(UsageError) -> String {
        guard index + 1 < arguments.count else { throw UsageError("\(option) needs a value") }
        index += 1
        return arguments[index]
    }

    while index < arguments.count {
        let argument = arguments[index]
        defer { index += 1 }
        if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
            options.paths.append(argument)
            continue
        }
        // --option=value is the same as --option value.
        var name = argument
        var inlineValue: String?
        if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
            name = String(argument[..<equals])
            inlineValue = String(argument[argument.index(after: equals)...])
        }
        func optionValue() throws(UsageError) -> String {
            if let inlineValue { return inlineValue }
            return try value(for: name)
        }
        if name == "--" {
            guard inlineValue == nil else { throw UsageError("-- takes no value") }
            optionsEnded = true
            continue
        }
        guard let option = OptionDescriptor.named(name) else { throw UsageError("unknown option '\(argument)'") }
        if inlineValue != nil && !option.value.acceptsInlineValue { throw UsageError("\(name) takes no value") }
        if option.needsExec { execOnly.append(name) }
        switch option.id {
        case .help: return .help
        case .version: return .version
        case .completions:
            let text = try optionValue()
            guard let shell = ShellCompletion(rawValue: text) else {
                throw UsageError("--completions takes bash, zsh or fish, not '\(text)'")
            }
            return .completions(shell)
        case .json: options.json = true
        case .recursive: options.recursive = true
        case .once: options.once = true
        case .compareContent: options.compareContent = true
        case .gitignore: options.gitignore = true
        case .restart: options.restart = true
        case .postpone: options.postpone = true
        case .debounce:
            let text = try optionValue()
            let maximum = Int(maximumSeconds) * 1000
            guard let milliseconds = Int(text), milliseconds >= 0, milliseconds <= maximum else {
                throw UsageError("--debounce takes a whole number of milliseconds from 0 to \(maximum), not '\(text)'")
            }
            options.debounceMilliseconds = milliseconds
        case .grace:
            let text = try optionValue()
            guard let seconds = Double(text), seconds.isFinite, seconds >= 0, seconds <= maximumSeconds else {
                throw UsageError("--grace takes a number of seconds from 0 to \(Int(maximumSeconds)), not '\(text)'")
            }
            options.grace = seconds
        case .exclude:
            let pattern = try optionValue()
            guard !pattern.isEmpty else { throw UsageError("--exclude needs a non-empty pattern") }
            options.excludes.append(pattern)
        case .file:
            let file = try optionValue()
            guard !file.isEmpty else { throw UsageError("\(name) needs a non-empty path") }
            options.files.append(file)
        case .event:
            events = (events ?? []).union(try parseEvents(try optionValue(), option: name))
        case .poll:
            // The interval is optional: a number after --poll is it (a directory named like a
            // number goes after --, or --poll=1 first).
            var text = inlineValue
            if text == nil, index + 1 < arguments.count, let seconds = Double(arguments[index + 1]), seconds.isFinite,
                seconds > 0
            {
                index += 1
                text = arguments[index]
            }
            guard let text else {
                options.poll = 1
                break
            }
            guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds <= maximumSeconds else {
                throw UsageError(
                    "--poll takes a number of seconds above 0 and at most \(Int(maximumSeconds)), not '\(text)'")
            }
            options.poll = seconds
        case .backend:
            let text = try optionValue()
            switch text {
            case "automatic": options.backend = .automatic
            case "inotify": options.backend = .inotify
            case "fanotify": options.backend = .fanotify
            default: throw UsageError("--backend takes automatic, inotify or fanotify, not '\(text)' (--poll polls)")
            }
        case .settle, .settleMax:
            let text = try optionValue()
            guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds <= maximumSeconds else {
                throw UsageError(
                    "\(name) takes a number of seconds above 0 and at most \(Int(maximumSeconds)), not '\(text)'")
            }
            if option.id == .settle { options.settle = seconds } else { options.settleMax = seconds }
        case .state:
            let text = try optionValue()
            guard !text.isEmpty else { throw UsageError("--state needs a file") }
            options.state = text
        case .stateInterval:
            let text = try optionValue()
            guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds <= maximumSeconds else {
                throw UsageError(
                    "--state-interval takes a number of seconds above 0 and at most \(Int(maximumSeconds)), not '\(text)'"
                )
            }
            options.stateInterval = seconds
            stateIntervalGiven = true
        case .exec:
            let command = Array(arguments[(index + 1)...])
            guard let program = command.first, !program.isEmpty else { throw UsageError("--exec needs a command") }
            options.exec = command
            index = arguments.count
        }
    }
    if let events { options.events = events }
    guard !options.paths.isEmpty || !options.files.isEmpty else { throw UsageError("no directory to watch") }
    if options.paths.contains(where: \.isEmpty) {
        throw UsageError("an empty path is not a directory; use . for the current one")
    }
    if let option = execOnly.first, options.exec == nil { throw UsageError("\(option) goes with --exec") }
    if stateIntervalGiven && options.state == nil { throw UsageError("--state-interval goes with --state") }
    if options.state != nil && options.paths.count + options.files.count != 1 {
        throw UsageError("--state keeps the state of one PATH; run one dirwatch per directory")
    }
    if options.compareContent && options.settle == nil { throw UsageError("--compare-content goes with --settle") }
    if let maximum = options.settleMax {
        guard let settle = options.settle else { throw UsageError("--settle-max goes with --settle") }
        guard maximum >= settle else {
            throw UsageError("--settle-max (\(maximum)) must be at least --settle (\(settle))")
        }
    }
    return .watch(options)
}

/// The kinds `--event` takes, by lowercased name: dirwatch's own, as its output prints them, and
/// inotifywait's, so that an `inotifywait -e` list works as it is.
let eventKinds: [String: DirectoryWatcher.Events] = [
    "created": .created, "create": .created,
    "removed": .removed, "delete": .removed,
    "modified": .modified, "modify": .modified,
    "attributeschanged": .attributesChanged, "attributes": .attributesChanged, "attrib": .attributesChanged,
    // The library reports renames and moves in and out as one kind of event: inotifywait's two
    // halves of a move cannot be told apart here.
    "moved": .moved, "move": .moved, "moved_from": .moved, "moved_to": .moved,
    "opened": .opened, "open": .opened,
    "accessed": .accessed, "access": .accessed,
    "writerclosed": .writerClosed, "close_write": .writerClosed,
    "readerclosed": .readerClosed, "close_nowrite": .readerClosed,
    "close": [.writerClosed, .readerClosed],
    "all": .all, "default": .default,
]

/// The kinds a comma-separated `--event` list names, case-insensitively.
func parseEvents(_ list: String, option: String) throws(UsageError) -> DirectoryWatcher.Events {
    guard !list.isEmpty else { throw UsageError("\(option) needs a kind, such as created,modified") }
    var events: DirectoryWatcher.Events = []
    for word in list.split(separator: ",", omittingEmptySubsequences: false) {
        guard !word.isEmpty else { throw UsageError("\(option) has an empty kind in '\(list)'") }
        guard let kinds = eventKinds[word.lowercased()] else {
            throw UsageError(
                "\(option): unknown kind '\(word)'; valid: created, removed, modified, attributesChanged "
                    + "(or attributes), moved (renamed, exchanged, movedIn, movedOut), opened, accessed, writerClosed, "
                    + "readerClosed, all, default, or inotifywait's create, delete, modify, attrib, move, "
                    + "moved_from, moved_to, open, access, close_write, close_nowrite, close")
        }
        events.formUnion(kinds)
    }
    return events
}

/// `dirwatch --help`: the synopsis, the option list made from ``OptionDescriptor/table``, the exit
/// statuses and the output's escapes.
public let usage = usageHead + OptionDescriptor.helpText(width: helpWidth) + "\n\n" + usageTail

/// The width `--help` is wrapped to.
let helpWidth = 95

private let usageHead = #"""
    usage: dirwatch [options] [PATH...] [-f FILE]... [--exec COMMAND [ARG...]]

    Watch each directory PATH, and each FILE, and print their changes, one line each, until
    interrupted. A PATH that is a regular file (or a symbolic link to one) is watched as a FILE.
    Once every watch is in place, "Watches established." is written to stderr.

    options:

    """#

private let usageTail = #"""
    exit status: 0 interrupted (SIGINT, SIGTERM), --once done, or stdout closed; 1 a watch could
    not be set up; 2 usage error; 3 every watched directory (for a FILE, its directory) was removed
    or moved away; 4 interrupted, and the --exec command had to be killed (SIGKILL: it outlived
    --grace, or a second signal came); with --once --exec, the command's status.
    Text output escapes names: \\, \n, \t, \r; other control and bidirectional characters as
    \u{XXXX}; bytes that are not UTF-8 as \xNN; the > of " ->" in a name as \u{3E}, so that the
    only " -> " on a line separates a rename's names.
    Colour is used when stdout is a terminal and NO_COLOR is not set.
    """#

/// `dirwatch --version`: with the commit it was built from when the build named one
/// (`-Xcc -DDIRWATCH_COMMIT='"abc123"'`, as Scripts/install does).
public let version = versionLine(commit: String(cString: cdw_build_commit()))

/// The version line for a build of `commit` ("" when the build named none).
func versionLine(commit: String) -> String {
    "dirwatch 0.1.0 (\(commit.isEmpty ? "" : "commit \(commit); ")DirectoryWatcher, inotify + epoll)"
}
