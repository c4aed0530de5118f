/// The mount table while trees follow it (``Router+Mounts``): a mount made or gone inside a tree
/// is a directory appearing or vanishing that no inotify or fanotify event reports.
struct MountFollowing {
    /// The table as last read; nil while no tree follows it.
    var table: [MountTable.Mount]?
    /// The trees that follow it.
    var trees: [Subscription] = []
}
