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
    /// The last directory a record named, and its descriptor: the records of a read come mostly
    /// from one directory, and comparing its handle costs less than asking the backend.
    private var last: (handle: KernelHandle, wd: Int32)?

    init(backend: any FileSystemMarkBackend) { self.backend = backend }

    /// The descriptor of a directory's handle, if it has one.
    mutating func descriptor(_ handle: KernelHandle) -> Int32? {
        if let last, last.handle == handle { return last.wd }
        guard let wd = backend.descriptor(handle) else { return nil }
        last = (handle, wd)
        return wd
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
