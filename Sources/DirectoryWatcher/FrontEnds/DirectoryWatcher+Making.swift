import Dispatch
import Glibc

/// The ways to make a watcher: the sample's factory and its forms with options, a queue or a
/// closure; a single file's watch.
extension DirectoryWatcher {
    /// Makes a watcher of the directory at `path` that does not watch yet: it starts with
    /// ``startMonitoring()``, and can stop and start again any number of times. For a set of
    /// watchers started and stopped together (``MonitorGroup``), or a watcher made once and
    /// started when needed, as MHWDirectoryWatcher's was.
    ///
    /// ```swift
    /// let watcher = try DirectoryWatcher(path: "/srv/uploads", delegate: self)
    /// try watcher.startMonitoring()
    /// ```
    ///
    /// - Parameters:
    ///   - path: A directory, absolute or relative to the current directory now. Whether it
    ///     exists is checked when the watcher starts.
    ///   - options: What to report and how, as for ``watchFolder(path:options:delegate:queue:)``.
    ///   - delegate: Told about changes; held weakly.
    ///   - queue: Where callbacks run; nil for where `options.delivery` says.
    /// - Throws: ``DirectoryWatcherError`` for an empty path or options that cannot be used.
    public convenience init(
        path: String, options: Options = Options(), delegate: any DirectoryWatcherDelegate,
        queue: DispatchQueue? = nil
    ) throws(DirectoryWatcherError) {
        try self.init(given: path, options: options, watchesFile: false, queue: queue, loop: nil)
        self.delegate = delegate
    }

    /// Makes a watcher of the directory at `path` that calls `handler` with each batch once it
    /// is started (``startMonitoring()``). The watcher keeps `handler` alive until it is
    /// invalidated.
    public convenience init(
        path: String, options: Options = Options(), queue: DispatchQueue? = nil,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(DirectoryWatcherError) {
        try self.init(given: path, options: options, watchesFile: false, queue: queue, loop: nil)
        retain(ClosureDelegate(handler))
    }

    /// Makes a watcher of one file, by name, as ``watchFile(path:options:delegate:queue:)``
    /// watches it, that starts with ``startMonitoring()``.
    public convenience init(
        filePath: String, options: Options = Options(), delegate: any DirectoryWatcherDelegate,
        queue: DispatchQueue? = nil
    ) throws(DirectoryWatcherError) {
        try self.init(given: filePath, options: options, watchesFile: true, queue: queue, loop: nil)
        self.delegate = delegate
    }

    /// Makes a watcher of one file, by name, that calls `handler` with each batch once it is
    /// started. The watcher keeps `handler` alive until it is invalidated.
    public convenience init(
        filePath: String, options: Options = Options(), queue: DispatchQueue? = nil,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(DirectoryWatcherError) {
        try self.init(given: filePath, options: options, watchesFile: true, queue: queue, loop: nil)
        retain(ClosureDelegate(handler))
    }

    /// Starts watching the directory at `path`: the sample's factory, with what it reports and
    /// where its callbacks run as options.
    ///
    /// ```swift
    /// watcher = try DirectoryWatcher.watchFolder(path: "/srv/uploads", delegate: self)
    /// let options = DirectoryWatcher.Options(events: [.created, .removed])
    /// watcher = try DirectoryWatcher.watchFolder(path: "/srv/uploads", options: options, delegate: self, queue: .main)
    /// ```
    ///
    /// Callbacks of one watcher never overlap and come in kernel order, even on a concurrent
    /// queue: each watcher delivers through a serial queue that targets `queue`. Pass
    /// `DispatchQueue.main` to be called on the main thread, as the sample's run-loop source was
    /// (the main queue must be serviced: `dispatchMain()`, a run loop, or an app framework).
    ///
    /// - Parameters:
    ///   - path: A directory, absolute or relative to the current directory.
    ///   - options: What to report and how; by default every change of name, content and
    ///     attributes, recovered exactly after an overflow.
    ///   - delegate: Told about changes; held weakly.
    ///   - queue: Where callbacks run; nil for where `options.delivery` says (by default the
    ///     library's threads: ``Delivery/automatic``).
    /// - Throws: ``DirectoryWatcherError``, naming the path and the cause.
    public static func watchFolder(
        path: String, options: Options = Options(), delegate: any DirectoryWatcherDelegate,
        queue: DispatchQueue? = nil
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(path: path, options: options, delegate: delegate, queue: queue)
    }

    /// Starts watching the directory at `path`, as ``watchFolder(path:options:delegate:queue:)``
    /// does, and calls `handler` with each batch of changes.
    ///
    /// ```swift
    /// let watcher = try DirectoryWatcher.watchFolder(path: "/srv/uploads") { changes in
    ///     for change in changes { print(change) }
    /// }
    /// ```
    ///
    /// The watcher keeps `handler` alive until it is invalidated. Keep the watcher: dropping it
    /// stops the watch.
    public static func watchFolder(
        path: String, options: Options = Options(), queue: DispatchQueue? = nil,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(
            path: path, options: options, delegate: ClosureDelegate(handler), retainingDelegate: true, queue: queue)
    }

    /// Starts watching one file, by name, so that the watch survives the file being replaced.
    ///
    /// ```swift
    /// watcher = try DirectoryWatcher.watchFile(path: "/etc/myapp/config.toml", delegate: self)
    /// ```
    ///
    /// Editors and configuration tools save a file atomically: they write a new file next to it
    /// and rename it over the old one. A watch on the file's inode would end there, watching a
    /// file that no longer has a name. This watch instead watches the file's directory for the
    /// file's name, so it reports every file that bears the name, one after the other:
    ///
    /// | What happens to the file | What is reported (``DirectoryChange/path`` is `path`) |
    /// |---|---|
    /// | written, attributes changed | ``DirectoryChange/Kind/modified``, ``DirectoryChange/Kind/attributesChanged`` |
    /// | replaced by a rename in its directory (an atomic save) | ``DirectoryChange/Kind/renamed``, ``DirectoryChange/oldPath`` the replacement's old path |
    /// | renamed away within its directory | ``DirectoryChange/Kind/renamed`` with ``DirectoryChange/oldPath`` `path` and the new path in ``DirectoryChange/path`` |
    /// | moved in from, or out to, another directory | ``DirectoryChange/Kind/movedIn``, ``DirectoryChange/Kind/movedOut`` |
    /// | removed | ``DirectoryChange/Kind/removed`` |
    /// | created again, after a removal or a move away | ``DirectoryChange/Kind/created`` |
    ///
    /// The watch goes on after a removal or a move away, and reports the next file of that name.
    /// It ends only with its directory: when the directory is removed or moved, the watcher
    /// reports ``DirectoryChange/Kind/rootRemoved`` or ``DirectoryChange/Kind/rootMoved`` with the
    /// directory's path and stops itself.
    ///
    /// The file need not exist yet; its directory must. When `path` is a symbolic link, it is
    /// followed once, when watching starts (as the kernel follows a watched directory's link), and
    /// the watch then follows the name the link points to; changes still carry `path`. Writes
    /// through another hard link in another directory are not seen, since only the name is
    /// watched.
    ///
    /// - Parameters:
    ///   - path: The file, absolute or relative to the current directory.
    ///   - options: What to report; by default, the same kinds as a directory watch.
    ///   - delegate: Told about changes; held weakly.
    ///   - queue: Where callbacks run, as in ``watchFolder(path:options:delegate:queue:)``; nil for where
    ///     `options.delivery` says (by default the library's threads).
    /// - Throws: ``DirectoryWatcherError``, naming the path and the cause: the directory is
    ///   missing or not a directory, or `path` names no entry of a directory (`/`).
    public static func watchFile(
        path: String, options: Options = Options(), delegate: any DirectoryWatcherDelegate,
        queue: DispatchQueue? = nil
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(path: path, options: options, watchesFile: true, delegate: delegate, queue: queue)
    }

    /// Starts watching one file by name, as ``watchFile(path:options:delegate:queue:)`` does, and
    /// calls `handler` with each batch. The watcher keeps `handler` alive until it is invalidated.
    public static func watchFile(
        path: String, options: Options = Options(), queue: DispatchQueue? = nil,
        handler: @escaping @Sendable ([DirectoryChange]) -> Void
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        try make(
            path: path, options: options, watchesFile: true, delegate: ClosureDelegate(handler),
            retainingDelegate: true, queue: queue)
    }

    static func make(
        path: String, options: Options = Options(), watchesFile: Bool = false, delegate: any DirectoryWatcherDelegate,
        retainingDelegate: Bool = false, queue: DispatchQueue?, loop: EventLoop? = nil,
        backlog: Backlog = Backlog()
    ) throws(DirectoryWatcherError) -> DirectoryWatcher {
        let watcher = try DirectoryWatcher(
            given: path, options: options, watchesFile: watchesFile, queue: queue, loop: loop, backlog: backlog)
        if retainingDelegate { watcher.retain(delegate) } else { watcher.delegate = delegate }
        do {
            try watcher.startMonitoring()
        } catch {
            watcher.invalidate()
            throw error
        }
        return watcher
    }
}
