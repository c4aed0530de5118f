/// What the router keeps for the trees it watches through a backend that marks whole file
/// systems (``FileSystemMarkBackend``, fanotify's; ``Router+MarkedTrees``): records that name
/// directories by file handle, turned into the watch table's descriptors and ``BackendEvent``s.
struct MarkedTrees {
    /// The marks and the table of directory handles.
    let backend: any FileSystemMarkBackend
    /// The trees watched through the group, whose roots an unknown handle is resolved against.
    var trees: [Subscription] = []
    /// Directories of the trees still to be listed, after the tree was ready, so that an overflow
    /// is recovered exactly (``Router/continueSnapshots()``).
    var snapshotQueue: [(subscription: Subscription, node: TreeNode)] = []
    /// What the trees asked for, with every change of name: the bits of a record that are routed.
    var wanted: UInt32 = 0
    /// While a record of a directory's creation is routed: that directory's handle.
    var creatingDirectory: KernelHandle?
    /// The last cookie given to a rename, which pairs its halves as inotify's cookies do.
    var cookie: UInt32 = 0
    /// The handle of the entry the rename being routed moves, against ``ExchangeHold/object``.
    var renamedObject: KernelHandle?
    /// The last two directories records named, the latest first, each with its descriptor, or
    /// nil for a directory outside every tree: the records of a read come mostly from one
    /// directory, or two in turn (the tree's and a build's or a log's elsewhere on the file
    /// system, which the mark reports too), and comparing a handle costs less than making it
    /// and hashing it to ask the backend (Docs/benchmarks.md, "Records of two directories in
    /// turn").
    private var last: (handle: KernelHandle, wd: Int32?)?
    private var previous: (handle: KernelHandle, wd: Int32?)?

    init(backend: any FileSystemMarkBackend) { self.backend = backend }

    /// When the directory `event` names (its new one, `renamed`) is one of the last two records
    /// named: its descriptor, or nil inside for a directory outside every tree. Nil otherwise.
    /// (Mutating: called on the router's stored property, a plain method would be given a copy
    /// of this whole struct, six retains and releases a record.)
    mutating func last(namedBy event: MarkEvent, renamed: Bool = false) -> Int32?? {
        if let last, event.names(last.handle, renamed: renamed) { return .some(last.wd) }
        guard let previous, event.names(previous.handle, renamed: renamed) else { return nil }
        swap(&last, &self.previous)
        return .some(previous.wd)
    }

    /// Keeps `handle` as the latest directory named, the one before it as the previous.
    private mutating func remember(_ handle: KernelHandle, _ wd: Int32?) {
        previous = last
        last = (handle, wd)
    }

    /// The one of the last two named whose handle is `handle`, if either is, kept as the latest.
    private mutating func cached(_ handle: KernelHandle) -> (handle: KernelHandle, wd: Int32?)? {
        if let last, last.handle == handle { return last }
        guard let previous, previous.handle == handle else { return nil }
        swap(&last, &self.previous)
        return previous
    }

    /// The descriptor of a directory's handle, if it has one.
    mutating func descriptor(_ handle: KernelHandle) -> Int32? {
        if let known = cached(handle) { return known.wd }
        guard let wd = backend.descriptor(handle) else { return nil }
        remember(handle, wd)
        return wd
    }

    /// The descriptor of a directory's handle, given now if it has none (it is in a tree now,
    /// if it was outside).
    mutating func descriptor(for handle: KernelHandle) -> Int32 {
        (last, previous) = (nil, nil)
        return backend.descriptor(for: handle)
    }

    /// Whether the directory of `handle` was found outside every tree.
    mutating func isOutside(_ handle: KernelHandle) -> Bool {
        if let known = cached(handle) { return known.wd == nil }
        guard backend.isOutside(handle) else { return false }
        remember(handle, nil)
        return true
    }

    /// The directory of `handle` is outside every tree.
    mutating func markOutside(_ handle: KernelHandle) {
        backend.markOutside(handle)
        // Kept already: it is the latest now.
        if cached(handle) != nil {
            last = (handle, nil)
        } else {
            remember(handle, nil)
        }
    }

    /// What was outside may be inside now (a directory moved into a tree, a tree added).
    mutating func forgetOutside() {
        backend.forgetOutside()
        if let previous, previous.wd == nil { self.previous = nil }
        if let last, last.wd == nil { (self.last, previous) = (previous, nil) }
    }

    /// No watcher uses the directory of `wd` any more.
    mutating func forget(_ wd: Int32) {
        if previous?.wd == wd { previous = nil }
        if last?.wd == wd { (last, previous) = (previous, nil) }
        backend.forget(wd)
    }

    /// The loop is stopping.
    mutating func closeAll() {
        (last, previous) = (nil, nil)
        backend.closeAll()
    }
}
