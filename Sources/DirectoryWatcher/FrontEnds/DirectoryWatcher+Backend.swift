import Dispatch
import Glibc

/// Which backend a start uses: inotify, a fanotify tree, or polling where inotify is blind.
extension DirectoryWatcher {
    /// Which backend watches `directory`: what the caller asked for, or for
    /// ``Backend/automatic`` what its file system allows (``FileSystemKind``).
    func chooseBackend(for directory: FileSystemPath, on loop: EventLoop) -> BackendChoice {
        // Asked of the kernel even when forced: a warning still applies. A directory whose file
        // system cannot be asked (missing) fails in the subscribe that follows, with its own error.
        let kind = try? FileSystemKind.of(directory, system: loop.system)
        return Self.chooseBackend(
            for: directory, options: options, watchesFile: watchesFile, fileSystem: kind,
            inotifyUnavailable: loop.inotifyUnavailable)
    }

    /// The choice itself, from what was asked and what is known of the directory's file system
    /// (nil: unknown) and of inotify (unavailable, and why): no system call.
    static func chooseBackend(
        for directory: FileSystemPath, options: Options, watchesFile: Bool, fileSystem kind: FileSystemKind?,
        inotifyUnavailable: SyscallError?
    ) -> BackendChoice {
        let interval = options.pollingInterval
        let warning =
            kind?.visibility == .virtual
            ? "\(directory) is on \(kind!.name), where the kernel's own changes raise no event and no listing shows them"
            : nil
        let tree = options.recursive && !watchesFile
        switch options.backend {
        case .inotify:
            return BackendChoice(
                kind: .inotify, interval: nil, fileSystem: kind?.name, reason: "inotify was asked for", warning: warning
            )
        case .fanotify where tree:
            return BackendChoice(
                kind: .fanotify, interval: nil, fileSystem: kind?.name, reason: "fanotify was asked for",
                warning: warning)
        case .fanotify:
            return BackendChoice(
                kind: .inotify, interval: nil, fileSystem: kind?.name,
                reason: "fanotify watches trees; one \(watchesFile ? "file" : "directory") is watched through inotify",
                warning: warning)
        case .polling:
            return BackendChoice(
                kind: .polling, interval: interval, fileSystem: kind?.name, reason: "polling was asked for",
                warning: warning)
        case .automatic:
            if let unavailable = inotifyUnavailable {
                return BackendChoice(
                    kind: .polling, interval: interval, fileSystem: kind?.name,
                    reason:
                        "inotify is unavailable (\(DirectoryWatcherError(unavailable, path: directory).reason))",
                    warning: warning)
            }
            guard let kind else {
                return BackendChoice(
                    kind: .inotify, interval: nil, fileSystem: nil, reason: "the file system's type is unknown",
                    warning: nil)
            }
            if kind.visibility == .remote {
                return BackendChoice(
                    kind: .polling, interval: interval, fileSystem: kind.name,
                    reason: "\(directory) is on \(kind.name), whose changes made elsewhere inotify does not see",
                    warning: nil)
            }
            if tree && !options.followsSymbolicLinks && !options.gitignore && kind.visibility != .virtual {
                // Tried on the loop; a refusal (no capability, no file handles) falls back to
                // inotify with the reason, which the subscribe puts in the session.
                return BackendChoice(
                    kind: .fanotify, interval: nil, fileSystem: kind.name,
                    reason: "\(directory) is on \(kind.name), and the process may mark the whole file system",
                    warning: warning)
            }
            return BackendChoice(
                kind: .inotify, interval: nil, fileSystem: kind.name,
                reason: "\(directory) is on \(kind.name), a local file system"
                    + (tree && options.followsSymbolicLinks ? "; fanotify does not follow symbolic links" : "")
                    + (tree && options.gitignore
                        ? "; a tree that leaves out what git ignores is watched through inotify" : ""),
                warning: warning)
        }
    }
}
