/// One option of `dirwatch`'s command line, as ``OptionDescriptor/table`` lists it: the one
/// source of what the parser recognizes (``parseArguments(_:)`` looks every option up in the
/// table) and of the option list in `dirwatch --help` (``OptionDescriptor/helpText(width:)``), and of
/// the shell completions (``ShellCompletion``).
///
/// `--`, the end of the options, is not an option and is not in the table: the parser takes it
/// before looking anything up.
public struct OptionDescriptor: Equatable, Sendable {
    /// Which option this is: what the parser does with it.
    public enum ID: CaseIterable, Equatable, Hashable, Sendable {
        case file, event, json, exclude, gitignore, once, exec, postpone, debounce, restart, grace, recursive, backend,
            poll
        case settle, settleMax, compareContent, state, stateInterval, completions, help, version
    }

    /// What follows the option on the command line.
    public enum Value: Equatable, Sendable {
        /// Nothing: a flag. `--flag=value` is a usage error.
        case none
        /// One argument, the next one or the part after `=` (`--file FILE`, `--file=FILE`).
        case required(placeholder: String)
        /// An argument only when it is written after `=` or the next one is one (`--poll 2`, a
        /// number); else none.
        case optional(placeholder: String)
        /// Every argument after the option (`--exec CMD [ARG...]`), so it comes last. No `=`.
        case rest(placeholder: String)

        /// The value's name as `--help` shows it after the option: `FILE`, `[SECONDS]`,
        /// `CMD [ARG...]`; nil for a flag.
        public var synopsis: String? {
            switch self {
            case .none: nil
            case .required(let placeholder), .rest(let placeholder): placeholder
            case .optional(let placeholder): "[\(placeholder)]"
            }
        }

        /// Whether the value may be written after `=` in the same argument (`--settle=2`).
        public var acceptsInlineValue: Bool {
            switch self {
            case .required, .optional: true
            case .none, .rest: false
            }
        }
    }

    public let id: ID
    /// The one-character name, without its dash (`f` for `-f`); nil when there is none.
    public let short: Character?
    /// The long names, without their dashes: the first as `--help` lists it first, then its
    /// aliases (`event`, `events`). Never empty.
    public let long: [String]
    public let value: Value
    /// Whether the option means something only with `--exec`; without it, it is a usage error.
    public let needsExec: Bool
    /// What it does, as one paragraph: `--help` wraps it.
    public let help: String
    /// The words its value is made of, when they are a known few (`--backend`'s names, `--event`'s
    /// kinds), for completion; empty when the value is free (a path, a number).
    public let choices: [String]

    public init(
        _ id: ID, short: Character? = nil, long: [String], value: Value = .none, needsExec: Bool = false,
        choices: [String] = [], help: String
    ) {
        precondition(!long.isEmpty, "an option has a long name")
        self.id = id
        self.short = short
        self.long = long
        self.value = value
        self.needsExec = needsExec
        self.help = help
        self.choices = choices
    }

    /// Every spelling the parser recognizes, with its dashes: the short one first (`-f`,
    /// `--file`).
    public var names: [String] {
        (short.map { ["-\($0)"] } ?? []) + long.map { "--\($0)" }
    }

    /// The option whose spelling (with its dashes) is `name`, if any.
    public static func named(_ name: String) -> OptionDescriptor? {
        byName[name]
    }

    private static let byName: [String: OptionDescriptor] = {
        var byName: [String: OptionDescriptor] = [:]
        for option in table {
            for name in option.names {
                precondition(byName[name] == nil, "\(name) is in the option table twice")
                byName[name] = option
            }
        }
        return byName
    }()

    /// `dirwatch`'s options, in the order `--help` lists them.
    public static let table: [OptionDescriptor] = [
        OptionDescriptor(
            .file, short: "f", long: ["file"], value: .required(placeholder: "FILE"),
            help: "watch one file by name, through its directory, so that it stays watched when an atomic save "
                + "renames a new file over it, or when it is removed and made again; FILE need not exist, its "
                + "directory must (repeatable)"),
        OptionDescriptor(
            .event, short: "E", long: ["event", "events"], value: .required(placeholder: "KINDS"),
            choices: [
                "created", "removed", "modified", "attributesChanged", "attributes", "moved", "opened", "accessed",
                "writerClosed", "readerClosed", "create", "delete", "modify", "attrib", "move", "moved_from",
                "moved_to", "open", "access", "close_write", "close_nowrite", "close", "all", "default",
            ],
            help: "print only these kinds of change: a comma-separated list, repeatable (the union is taken), "
                + "case-insensitive. dirwatch's names: created, removed, modified, attributesChanged (or "
                + "attributes), moved (renamed, exchanged, movedIn, movedOut), opened, accessed, writerClosed, readerClosed; "
                + "inotifywait's: create, delete, modify, attrib, move, moved_from and moved_to (both: moved), "
                + "open, access, close_write, close_nowrite, close (both closes); all; default (created, removed, "
                + "modified, attributesChanged, moved: what is printed without --event). rootRemoved, rootMoved, "
                + "overflow and failed are always printed. Not -e: that is --exclude here, unlike inotifywait's -e"),
        OptionDescriptor(
            .json, short: "j", long: ["json"],
            help: "one JSON object per change and line (kind, path, isDirectory, oldPath); control and "
                + #"bidirectional characters come as \uXXXX escapes"#),
        OptionDescriptor(
            .exclude, short: "e", long: ["exclude"], value: .required(placeholder: "GLOB"),
            help: "ignore changes whose name, or path below the watched directory, matches GLOB (fnmatch(3); "
                + "repeatable)"),
        OptionDescriptor(
            .gitignore, long: ["gitignore"],
            help: "leave out what git ignores: the .gitignore files in and above each PATH, "
                + ".git/info/exclude and the global excludes file, read as git reads them. With -r, an ignored "
                + "directory is never watched or listed; a .gitignore edited while watching is read again, what "
                + "it lets in printed as movedIn (and watched), what it now ignores as movedOut. .git itself is "
                + "not ignored by git's rules: add --exclude .git"),
        OptionDescriptor(
            .once, short: "1", long: ["once"],
            help: "exit 0 after the first batch of changes; with --exec, once the command has run for it (not at "
                + "start), with the command's status"),
        OptionDescriptor(
            .exec, short: "x", long: ["exec"], value: .rest(placeholder: "CMD [ARG...]"),
            help: "run CMD with ARGs once at start, then after each batch of changes (never through a shell; runs "
                + "never overlap; a stop reaches every process a run started, in any group or session). A run gets "
                + "its batch in full as JSON lines "
                + "on stdin (nothing at start); DIRWATCH_COUNT, how many paths it has; and DIRWATCH_PATHS, the "
                + "paths, each once, one per line, when they fit (128 KiB; unset otherwise: read stdin). Must come "
                + "last. A command that writes into a watched directory runs itself again: --exclude what it "
                + "writes"),
        OptionDescriptor(
            .postpone, short: "p", long: ["postpone"], needsExec: true,
            help: "with --exec: no run at start; wait for the first change"),
        OptionDescriptor(
            .debounce, long: ["debounce"], value: .required(placeholder: "MILLISECONDS"), needsExec: true,
            help: "with --exec: one run for the changes of MILLISECONDS from the first (default 50; 0 runs as "
                + "soon as a batch arrives)"),
        OptionDescriptor(
            .restart, long: ["restart"], needsExec: true,
            help: "with --exec: stop a run still going (SIGTERM to every process of it) and start again, as "
                + "entr -r does"),
        OptionDescriptor(
            .grace, long: ["grace"], value: .required(placeholder: "SECONDS"), needsExec: true,
            help: "with --exec: a run being stopped (--restart, SIGINT, SIGTERM) gets SIGKILL SECONDS after "
                + "SIGTERM (default 5; 0: at once); a second SIGINT or SIGTERM kills it at once"),
        OptionDescriptor(
            .recursive, short: "r", long: ["recursive"],
            help: "watch every directory below each PATH too, as they come and go (symbolic links are not "
                + "followed; a directory that --exclude matches is not watched at all, nor anything in it). With "
                + "CAP_SYS_ADMIN (root), through fanotify: one mark for the whole file system, ready at once "
                + "whatever the tree's size; else through inotify. Said on stderr"),
        OptionDescriptor(
            .backend, long: ["backend"], value: .required(placeholder: "NAME"),
            choices: ["automatic", "inotify", "fanotify"],
            help: "automatic (the default), inotify, or fanotify (-r only; fails, saying why, where it cannot be "
                + "used)"),
        OptionDescriptor(
            .poll, long: ["poll"], value: .optional(placeholder: "SECONDS"),
            help: "poll every SECONDS at most (default 1; four times faster while changes come) instead of using "
                + "inotify. Without it, network and shared file systems (NFS, SMB, 9p, sshfs and other FUSE "
                + "mounts), whose changes made elsewhere inotify never sees, are polled anyway; dirwatch then says "
                + "so on stderr, and warns on /proc, /sys and cgroups, where nothing is seen"),
        OptionDescriptor(
            .settle, long: ["settle"], value: .required(placeholder: "SECONDS"),
            help: "print a batch only once the writing is over: when the directory (or tree) has been quiet for "
                + "SECONDS and no file in it is still open for writing, with what the changes add up to (a file "
                + "created and written is one created line; made and removed, nothing)"),
        OptionDescriptor(
            .settleMax, long: ["settle-max"], value: .required(placeholder: "SECONDS"),
            help: "with --settle: print a batch at the latest SECONDS after its first change, however busy the "
                + "directory (default: 10, or four times --settle when that is longer)"),
        OptionDescriptor(
            .compareContent, long: ["compare-content"],
            help: "with --settle: print nothing for a rewrite of the same bytes; each file created or written is "
                + "read when its batch is due, and a digest kept (a file's first write is printed, and files over "
                + "64 MiB always are)"),
        OptionDescriptor(
            .state, long: ["state"], value: .required(placeholder: "FILE"),
            help: "keep what has been printed in FILE: started again with it, dirwatch first prints what changed "
                + "while it was not running (each marked while stopped; in JSON \"whileStopped\":true), then live "
                + "changes, none missing or repeated between the two. FILE is saved at exit (SIGINT, SIGTERM) and "
                + "every --state-interval; after a crash, what changed since the last save is printed again. One "
                + "PATH only"),
        OptionDescriptor(
            .stateInterval, long: ["state-interval"], value: .required(placeholder: "SECONDS"),
            help: "with --state: save FILE every SECONDS (default 60)"),
        OptionDescriptor(
            .completions, long: ["completions"], value: .required(placeholder: "SHELL"),
            choices: ShellCompletion.allCases.map(\.rawValue),
            help: "print the completion script for bash, zsh or fish and exit"),
        OptionDescriptor(.help, short: "h", long: ["help"], help: "show this help"),
        OptionDescriptor(.version, short: "V", long: ["version"], help: "show the version"),
    ]

    /// Where an option's help starts on its line in `--help`; its names and value come before,
    /// from column 2.
    public static let helpColumn = 24

    /// The lines that show this option in `--help`: its names and value from column 2 (one line
    /// for each further long name), its help from ``helpColumn``, wrapped at `width` columns.
    /// Names too long to leave two spaces before the help have a line of their own.
    public func helpLines(width: Int) -> [String] {
        let suffix = value.synopsis.map { " " + $0 } ?? ""
        let first = (short.map { "-\($0), " } ?? "    ") + "--" + long[0] + suffix
        let heads = [first] + long.dropFirst().map { "    --" + $0 + suffix }
        let text = Self.wrap(help, width: width - Self.helpColumn)
        let indent = String(repeating: " ", count: Self.helpColumn)
        var lines: [String] = []
        var next = text.startIndex
        for head in heads {
            let start = "  " + head
            if start.count + 2 <= Self.helpColumn, next < text.endIndex {
                lines.append(start + String(repeating: " ", count: Self.helpColumn - start.count) + text[next])
                next += 1
            } else {
                lines.append(start)
            }
        }
        lines += text[next...].map { indent + $0 }
        return lines
    }

    /// The option list of `--help`: every option of ``table``, in its order.
    public static func helpText(width: Int) -> String {
        table.flatMap { $0.helpLines(width: width) }.joined(separator: "\n")
    }

    /// `text` cut into lines of at most `width` characters at its spaces (a longer word has a
    /// line of its own).
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if line.isEmpty {
                line = String(word)
            } else if line.count + 1 + word.count <= width {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }
}
