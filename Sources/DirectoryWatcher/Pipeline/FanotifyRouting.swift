/// What the router keeps for the trees it watches through fanotify (``Router+Fanotify``): one
/// group whose records name directories by file handle, translated into the watch table's
/// descriptors and inotify's events.
struct FanotifyRouting {
    /// The group's marks and its table of directory handles.
    var marks: FanotifyMarks
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
}
