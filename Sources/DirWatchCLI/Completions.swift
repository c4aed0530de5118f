/// A shell that `dirwatch --completions SHELL` writes a completion script for.
///
/// Each script is made from ``OptionDescriptor/table`` alone, so an option added there is
/// completed in every shell with nothing more to write: every spelling of every option; for a
/// value, files where it names one (`FILE`, a `GLOB`), the known words where the table lists them
/// (``OptionDescriptor/choices``: `--backend`'s names, `--event`'s kinds, after a comma too), and
/// nothing for a number. After `--exec` come a command, then its arguments (files), never
/// `dirwatch`'s options; after `--`, paths only.
public enum ShellCompletion: String, CaseIterable, Sendable {
    case bash, zsh, fish

    /// The script, ending in a newline: for bash, a `_dirwatch` function and the `complete` that
    /// names it; for zsh, a `#compdef dirwatch` file (for a directory of `$fpath`, or sourced after
    /// `compinit`); for fish, `complete -c dirwatch` lines and the functions they call.
    public func script() -> String {
        switch self {
        case .bash: Self.bashScript()
        case .zsh: Self.zshScript()
        case .fish: Self.fishScript()
        }
    }

    /// What an option's value is completed with.
    enum ValueCompletion: Equatable {
        /// A flag, or a value only after `=` that is a number (`--poll`): nothing to complete.
        case none
        case files
        /// The table's choices; `commaSeparated`: a list of them (`--event created,moved`).
        case words([String], commaSeparated: Bool)
        /// Free text or a number: nothing to offer, but the next word is the value.
        case text
        /// `--exec`: a command, then its arguments.
        case command
    }

    static func valueCompletion(of option: OptionDescriptor) -> ValueCompletion {
        switch option.value {
        case .none, .optional: return .none
        case .rest: return .command
        case .required(let placeholder):
            if !option.choices.isEmpty {
                // The help says when the value is a list: the parser splits --event's at commas.
                return .words(option.choices, commaSeparated: option.help.contains("comma-separated"))
            }
            // A glob is most often a name in the tree: offering the names there helps.
            let fileLike = ["FILE", "PATH", "DIR", "GLOB"].contains { placeholder.contains($0) }
            return fileLike ? .files : .text
        }
    }

    /// The help's first clause, short enough for a menu, without its asides in parentheses: up to
    /// a `;`, `:` or `. ` that leaves a dozen characters at least, or to a `, ` when that is still
    /// long. A condition that opens the help ("with --exec: ...") comes after, in parentheses.
    static func summary(_ help: String) -> String {
        if help.hasPrefix("with "), let colon = help.firstRange(of: ": ") {
            return summary(String(help[colon.upperBound...])) + " (" + help[..<colon.lowerBound] + ")"
        }
        func cut(_ text: String, at separators: [String]) -> String {
            let ends = separators.flatMap { text.ranges(of: $0).map(\.lowerBound) }
            let end = ends.filter { text.distance(from: text.startIndex, to: $0) >= 12 }.min()
            return end.map { String(text[..<$0]) } ?? text
        }
        // Asides in parentheses left out: "a run being stopped (--restart, SIGINT, SIGTERM) gets".
        var plain = ""
        var depth = 0
        for character in help {
            if character == "(" { depth += 1 }
            if depth == 0 { plain.append(character) }
            if character == ")", depth > 0 { depth -= 1 }
        }
        plain = plain.replacing("  ", with: " ").replacing(" ,", with: ",").replacing(" ;", with: ";")
        let clause = cut(plain, at: ["; ", ": ", ". "])
        return (clause.count > 80 ? cut(clause, at: [", "]) : clause).trimmingSpaces()
    }

    // MARK: - bash

    static func bashScript() -> String {
        let table = OptionDescriptor.table
        let names = table.flatMap(\.names)
        let valued = table.filter { valueCompletion(of: $0) != .none && valueCompletion(of: $0) != .command }
        let exec = table.filter { valueCompletion(of: $0) == .command }.flatMap(\.names)
        var valueCases: [String] = []
        for option in valued {
            let pattern = option.names.joined(separator: " | ")
            switch valueCompletion(of: option) {
            case .files:
                valueCases.append("        \(pattern)) _dirwatch_files \"$prefix\" \"$cur\" ;;")
            case .words(let words, let commaSeparated):
                let list = words.joined(separator: " ")
                if commaSeparated {
                    valueCases.append(
                        """
                                \(pattern))
                                    # A list: the word after its last comma, the words before it kept.
                                    [[ $cur == *,* ]] && prefix+=${cur%,*},
                                    mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "\(list)" -- "${cur##*,}")
                                    compopt -o nospace 2>/dev/null
                                    ;;
                        """)
                } else {
                    valueCases.append(
                        "        \(pattern)) mapfile -t COMPREPLY < <(compgen -P \"$prefix\" -W \"\(list)\" -- \"$cur\") ;;"
                    )
                }
            case .none, .text, .command:
                break
            }
        }
        let takesValue = valued.flatMap(\.names).joined(separator: " | ")
        return """
            # bash completion for dirwatch, made from its option table by `dirwatch --completions bash`.
            # Installed by Scripts/install; by hand: source <(dirwatch --completions bash)

            # Files and directories starting with $2, each after $1, one per line (names with spaces
            # stay whole).
            _dirwatch_files() {
                compopt -o filenames 2>/dev/null
                mapfile -t COMPREPLY < <(compgen -f -P "$1" -- "$2")
            }

            _dirwatch() {
                local cur=${COMP_WORDS[COMP_CWORD]} word pending= prefix= i
                COMPREPLY=()
                # The words before the cursor: the end of the options, --exec (its command, then its
                # arguments), or an option whose value comes next; bash splits --file=x into --file = x.
                for ((i = 1; i < COMP_CWORD; i++)); do
                    word=${COMP_WORDS[i]}
                    if [[ -n $pending ]]; then
                        [[ $word == = ]] || pending=
                        continue
                    fi
                    case $word in
                    --)
                        _dirwatch_files "" "$cur"
                        return
                        ;;
                    \(exec.joined(separator: " | ")))
                        if ((i + 1 == COMP_CWORD)); then
                            mapfile -t COMPREPLY < <(compgen -c -- "$cur")
                        else
                            _dirwatch_files "" "$cur"
                        fi
                        return
                        ;;
                    \(takesValue)) pending=$word ;;
                    esac
                done
                if [[ -n $pending && $cur == = ]]; then
                    cur=
                elif [[ -z $pending && $cur == --*=* ]]; then
                    # --file=x in one word (an = not among COMP_WORDBREAKS).
                    pending=${cur%%=*}
                    prefix=$pending=
                    cur=${cur#*=}
                elif [[ $cur == = ]]; then
                    return
                fi
                if [[ -n $pending ]]; then
                    case $pending in
            \(valueCases.joined(separator: "\n"))
                    esac
                    return
                fi
                local names="\(names.joined(separator: " "))"
                if [[ $cur == -* ]]; then
                    mapfile -t COMPREPLY < <(compgen -W "$names" -- "$cur")
                else
                    _dirwatch_files "" "$cur"
                fi
            }

            complete -F _dirwatch dirwatch

            """
    }

    // MARK: - zsh

    static func zshScript() -> String {
        var specs: [String] = []
        for option in OptionDescriptor.table {
            let description = "[" + zshEscaped(summary(option.help)) + "]"
            let completion = valueCompletion(of: option)
            let placeholder: String
            switch option.value {
            case .none: placeholder = ""
            case .required(let name), .optional(let name), .rest(let name): placeholder = zshEscaped(name)
            }
            let argument: String
            switch completion {
            case .none:
                // --poll's number only after = here: a word after --poll is most often a path.
                argument = option.value == .none ? "" : "::\(placeholder): "
            case .files: argument = ":\(placeholder):_files"
            case .words(let words, let commaSeparated):
                argument =
                    commaSeparated
                    ? ":\(placeholder):_values -s , \(placeholder.lowercased()) \(words.joined(separator: " "))"
                    : ":\(placeholder):(\(words.joined(separator: " ")))"
            case .text: argument = ":\(placeholder): "
            // The words after it, as a command line of their own: a command, then its arguments.
            case .command: argument = ":*::command:_normal"
            }
            for name in option.names {
                let spelling: String
                switch option.value {
                case .optional where name.hasPrefix("--"): spelling = name + "=-"
                case .required where name.hasPrefix("--"): spelling = name + "="
                default: spelling = name
                }
                specs.append("        '*\(spelling)\(description)\(argument)'")
            }
        }
        specs.append("        '*:PATH:_files'")
        return """
            #compdef dirwatch
            # zsh completion for dirwatch, made from its option table by `dirwatch --completions zsh`.
            # Installed by Scripts/install as _dirwatch in a directory of $fpath; by hand, the same, or
            # source <(dirwatch --completions zsh) after compinit.

            _dirwatch() {
                # -S: after --, paths only.
                _arguments -S \\
            \(specs.joined(separator: " \\\n"))
            }

            # Autoloaded from $fpath, this file is the function's body: complete. Sourced: register it.
            if [[ $funcstack[1] == _dirwatch ]]; then
                _dirwatch "$@"
            else
                compdef _dirwatch dirwatch
            fi

            """
    }

    /// `text` for a description in `_arguments`' brackets, inside single quotes.
    static func zshEscaped(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "'": escaped += #"'\''"#
            case "[", "]", ":", "\\": escaped += "\\" + String(character)
            default: escaped.append(character)
            }
        }
        return escaped
    }

    // MARK: - fish

    static func fishScript() -> String {
        let table = OptionDescriptor.table
        let valued = table.filter { valueCompletion(of: $0) != .none && valueCompletion(of: $0) != .command }
        var lines: [String] = []
        var listFunctions: [String] = []
        for option in table {
            // Its value, after it as a word of its own: only what the value may be, never an
            // option (`--exclude -<TAB>` offers no option names).
            let after = "complete -c dirwatch -n '__dirwatch_value_for \(option.names.joined(separator: " "))'"
            var line = "complete -c dirwatch -n '__dirwatch_at options'"
            if let short = option.short { line += " -s \(short)" }
            for name in option.long { line += " -l \(name)" }
            switch valueCompletion(of: option) {
            case .none: break
            case .files:
                line += " -r -F"
                lines.append(after + " -F")
            case .text: line += " -x"
            case .words(let words, let commaSeparated):
                if commaSeparated {
                    // One function per list, named for its option.
                    let function = "__dirwatch_\(option.long[0].replacing("-", with: "_"))_list"
                    listFunctions.append(
                        """
                        # A list of \(option.long[0]) words: the word after the last comma, with those before kept.
                        function \(function)
                            set -l head (string replace -r '[^,]*$' '' -- (commandline -ct))
                            set head (string replace -r '^--[^=]*=' '' -- $head)
                            printf '%s\\n' $head\(words.count == 1 ? words[0] : "{" + words.joined(separator: ",") + "}")
                        end
                        """)
                    line += " -x -a '(\(function))'"
                    lines.append(after + " -x -a '(\(function))'")
                } else {
                    line += " -x -a '\(words.joined(separator: " "))'"
                    lines.append(after + " -x -a '\(words.joined(separator: " "))'")
                }
            case .command: line += " -x"
            }
            line += " -d '\(fishEscaped(summary(option.help)))'"
            lines.append(line)
        }
        let exec = table.filter { valueCompletion(of: $0) == .command }.flatMap(\.names)
        return """
            # fish completion for dirwatch, made from its option table by `dirwatch --completions fish`.
            # Installed by Scripts/install; by hand: dirwatch --completions fish > ~/.config/fish/completions/dirwatch.fish

            # Where the word being completed stands: "command" right after --exec, "arguments" after
            # its command, "paths" after --, "value" right after an option that takes one (as a
            # word of its own), else "options" (an option, or a path).
            function __dirwatch_position
                set -l words (commandline -opc)
                set -e words[1]
                set -l pending 0
                set -l index 0
                for word in $words
                    set index (math $index + 1)
                    if test $pending = 1
                        set pending 0
                        continue
                    end
                    switch $word
                        case --
                            echo paths
                            return
                        case \(exec.joined(separator: " "))
                            if test $index -eq (count $words)
                                echo command
                            else
                                echo arguments
                            end
                            return
                        case \(valued.flatMap(\.names).joined(separator: " "))
                            set pending 1
                    end
                end
                if test $pending = 1
                    echo value
                else
                    echo options
                end
            end

            function __dirwatch_at
                contains -- (__dirwatch_position) $argv
            end

            # Right after one of the options named (a value of its own).
            function __dirwatch_value_for
                __dirwatch_at value; or return 1
                set -l words (commandline -opc)
                contains -- $words[-1] $argv
            end

            \(listFunctions.joined(separator: "\n\n"))

            # No file unless a line below offers them: a value that is a number gets nothing.
            complete -c dirwatch -f
            complete -c dirwatch -n '__dirwatch_at options paths arguments' -F
            complete -c dirwatch -n '__dirwatch_at command' -a '(__fish_complete_command)'
            \(lines.joined(separator: "\n"))

            """
    }

    /// `text` inside fish's single quotes.
    static func fishEscaped(_ text: String) -> String {
        var escaped = ""
        for character in text {
            if character == "'" || character == "\\" { escaped += "\\" }
            escaped.append(character)
        }
        return escaped
    }
}
