/// Every script that is skipped and every intentional difference, with its reason, in one place.
/// MAPPING.md repeats them for readers; keep the two in step.
enum FsnotifyExceptions {
    /// `require X` features this library offers on Linux.
    static let supportedFeatures: Set<String> = [
        "symlink", "mkfifo", "mknod", "filter", "op_all", "op_open", "op_read", "op_close_write", "op_close_read",
        "recurse",
    ]

    /// `require X` features it does not offer: the script is skipped with this reason.
    static let unsupportedFeatures: [String: String] = [:]

    /// `skip X` conditions naming another platform: they do not apply on Linux.
    static let otherPlatforms: Set<String> = [
        "windows", "netbsd", "openbsd", "freebsd", "dragonfly", "darwin", "kqueue", "illumos", "solaris", "fen",
    ]

    /// An intentional difference: the events we print instead of fsnotify's Linux expectation.
    struct Difference {
        let expected: [FsnotifyEvent]
        let reason: String
    }

    /// Why a file watch never prints fsnotify's `chmod` for an unlink on Linux.
    private static let linkCount =
        "fsnotify's Linux block has `chmod /file` because it watches the file's inode, and the kernel "
        + "reports an unlink's link-count drop (IN_ATTRIB) to the inode's own watch only. Our file watch "
        + "watches the name through its directory, so that it survives atomic saves, and reports the "
        + "removal itself; the link count of a file being unlinked adds nothing."

    /// Scripts where we differ from fsnotify on purpose, by script name.
    static let differences: [String: Difference] = [
        "watch-dir/watch-file-inside-watched-dir": Difference(
            expected: [
                FsnotifyEvent("create", "/file"), FsnotifyEvent("write", "/file"), FsnotifyEvent("write", "/file"),
                FsnotifyEvent("remove", "/file"),
            ],
            reason: linkCount),
        "watch-file/remove-watched-file": Difference(
            expected: [FsnotifyEvent("remove", "/file")],
            reason: linkCount + " This is also fsnotify's own default (non-Linux) block."),
        "watch-file/overwrite-watched-file": Difference(
            expected: [
                FsnotifyEvent("create", "/file", from: "/unwatch"), FsnotifyEvent("write", "/file"),
                FsnotifyEvent("remove", "/file"),
            ],
            reason:
                "A file watch follows the name, not the inode: the file renamed over it is the watched file "
                + "from then on (an editor's atomic save), so its write and removal are reported. fsnotify's "
                + "inode watch reports the old inode's link count and deletion, then nothing (its script: "
                + "\"TODO: think what the best behaviour is here\")."),
        "watch-file/overwrite-watched-file-with-watched-file": Difference(
            expected: [
                FsnotifyEvent("create", "/file", from: "/other"), FsnotifyEvent("rename", "/other"),
                FsnotifyEvent("write", "/file"), FsnotifyEvent("remove", "/file"),
            ],
            reason:
                "As overwrite-watched-file: the watch of /file reports the file renamed onto its name "
                + "(with where it came from, which fsnotify's inode watch cannot know) and follows it; the "
                + "watch of /other reports its file renamed away."),
        "watch-file/re-add-renamed-file": Difference(
            expected: [
                FsnotifyEvent("rename", "/file"), FsnotifyEvent("create", "/file"), FsnotifyEvent("write", "/file"),
            ],
            reason:
                "A file watch outlives a rename away: it reports the name's re-creation (`touch /file`), which "
                + "fsnotify cannot see because its watch ended with the rename until the script adds it again."),
    ]
}
