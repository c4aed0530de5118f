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
    /// The last directory a record named, and its descriptor, or nil for a directory outside
    /// every tree: the records of a read come mostly from one directory (a build's, elsewhere on
    /// the file system, as often as the tree's own), and comparing its handle costs less than
    /// hashing it to ask the backend.
    private var last: (handle: KernelHandle, wd: Int32?)?

    init(backend: any FileSystemMarkBackend) { self.backend = backend }

    /// When the directory `event` names (its new one, `renamed`) is the last one a record named:
    /// its descriptor, or nil inside for a directory outside every tree. Nil otherwise.
    /// (Mutating though it changes nothing: called on the router's stored property, a plain
    /// method would be given a copy of this whole struct, six retains and releases a record.)
    mutating func last(namedBy event: MarkEvent, renamed: Bool = false) -> Int32?? {
        guard let last, event.names(last.handle, renamed: renamed) else { return nil }
        return .some(last.wd)
    }

    /// The descriptor of a directory's handle, if it has one.
    mutating func descriptor(_ handle: KernelHandle) -> Int32? {
        if let last, last.handle == handle { return last.wd }
        guard let wd = backend.descriptor(handle) else { return nil }
        last = (handle, wd)
        return wd
    }

    /// The descriptor of a directory's handle, given now if it has none (it is in a tree now,
    /// if it was outside).
    mutating func descriptor(for handle: KernelHandle) -> Int32 {
        last = nil
        return backend.descriptor(for: handle)
    }

    /// Whether the directory of `handle` was found outside every tree.
    mutating func isOutside(_ handle: KernelHandle) -> Bool {
        if let last, last.handle == handle { return last.wd == nil }
        guard backend.isOutside(handle) else { return false }
        last = (handle, nil)
        return true
    }

    /// The directory of `handle` is outside every tree.
    mutating func markOutside(_ handle: KernelHandle) {
        backend.markOutside(handle)
        last = (handle, nil)
    }

    /// What was outside may be inside now (a directory moved into a tree, a tree added).
    mutating func forgetOutside() {
        backend.forgetOutside()
        if let last, last.wd == nil { self.last = nil }
    }

    /// No watcher uses the directory of `wd` any more.
    mutating func forget(_ wd: Int32) {
        if last?.wd == wd { last = nil }
        backend.forget(wd)
    }

    /// The loop is stopping.
    mutating func closeAll() {
        last = nil
        backend.closeAll()
    }
}
