/// What inotify can see on a file system, from its type: the kernel's magic number
/// (`statfs`'s `f_type`) and, for FUSE, the mount's type name (`/proc/self/mountinfo`).
///
/// inotify reports what the local kernel does to a file. On a network or host-shared file system,
/// another machine (or the host of a VM or container) changes files without this kernel knowing:
/// no event ever comes, and a watcher waits forever. Those are polled. On procfs, sysfs and the
/// cgroup file systems the kernel's own changes raise no event either, and polling cannot help
/// much (their files have no meaningful sizes or times): a watcher there is warned.
struct FileSystemKind: Equatable, Sendable {
    /// What a watcher should do on it.
    enum Visibility: Equatable, Sendable {
        /// inotify sees every change: the local kernel makes them all.
        case local
        /// Changes can come from elsewhere (another machine, the host): inotify misses them.
        case remote
        /// Neither backend sees the kernel's own changes (procfs, sysfs, cgroups).
        case virtual
    }

    /// The magic number (`f_type`).
    let magic: UInt64
    /// Its name: the kernel's (`nfs`, `ext4`), or the mount's type for FUSE (`fuse.sshfs`).
    let name: String
    let visibility: Visibility

    // The magic numbers of linux/magic.h (and of file systems it leaves out) that matter here.
    static let nfs: UInt64 = 0x6969
    static let smb: UInt64 = 0x517B
    static let smb2: UInt64 = 0xFE53_4D42
    static let cifs: UInt64 = 0xFF53_4D42
    static let v9fs: UInt64 = 0x0102_1997
    static let fuse: UInt64 = 0x6573_5546
    static let ceph: UInt64 = 0x00C3_6400
    static let afs: UInt64 = 0x5346_414F
    static let kafs: UInt64 = 0x6B41_4653
    static let coda: UInt64 = 0x7375_7245
    static let ncp: UInt64 = 0x564C
    static let ocfs2: UInt64 = 0x7461_636F
    static let procfs: UInt64 = 0x9FA0
    static let sysfs: UInt64 = 0x6265_6572
    static let cgroup: UInt64 = 0x0027_E0EB
    static let cgroup2: UInt64 = 0x6367_7270

    /// File systems whose changes may be made elsewhere, by magic number.
    private static let remote: [UInt64: String] = [
        nfs: "nfs", smb: "smb", smb2: "smb2", cifs: "cifs", v9fs: "9p", ceph: "ceph", afs: "afs", kafs: "afs",
        coda: "coda", ncp: "ncp", ocfs2: "ocfs2",
    ]
    /// File systems the kernel fills itself.
    private static let virtual: [UInt64: String] = [
        procfs: "proc", sysfs: "sysfs", cgroup: "cgroup", cgroup2: "cgroup2",
    ]
    /// FUSE file systems known to be changed only through their mount: a disk's (`fuseblk`,
    /// ntfs-3g, exfat) and a container's overlay. (Not mirrors of a local directory such as
    /// bindfs, mergerfs or encfs: a change made in the directory behind them raises no event on
    /// the mount.)
    static let localFUSE: Set<String> = ["fuseblk", "fuse.ntfs-3g", "fuse.exfat", "fuse.fuse-overlayfs"]
    /// A few local types by name, for messages (the rest are shown by number).
    private static let localNames: [UInt64: String] = [
        0xEF53: "ext4", 0x5846_5342: "xfs", 0x9123_683E: "btrfs", 0x0102_1994: "tmpfs", 0x794C_7630: "overlay",
        0x2FC1_2FC1: "zfs", 0x4D44: "vfat", 0xF2F5_2010: "f2fs",
    ]

    /// The kind of a file system with magic number `magic`; `mountType` is the mount's type as
    /// `/proc/self/mountinfo` gives it, asked for FUSE only (nil when unknown).
    static func of(magic: UInt64, mountType: () -> String?) -> FileSystemKind {
        if let name = remote[magic] { return FileSystemKind(magic: magic, name: name, visibility: .remote) }
        if let name = virtual[magic] { return FileSystemKind(magic: magic, name: name, visibility: .virtual) }
        if magic == fuse {
            // A FUSE mount's own name says what it is: sshfs, rclone, gvfs and the like reach
            // elsewhere; an unknown one is taken to (a missed change is worse than a poll).
            let type = mountType() ?? "fuse"
            return FileSystemKind(magic: magic, name: type, visibility: localFUSE.contains(type) ? .local : .remote)
        }
        let name = localNames[magic] ?? "0x" + String(magic, radix: 16)
        return FileSystemKind(magic: magic, name: name, visibility: .local)
    }
}

/// Reads `/proc/self/mountinfo` (proc(5)): which mount a path is on, and its type. The table is
/// read as bytes, as the kernel writes it: a mount point is a path, which need not be UTF-8.
enum MountTable {
    /// The type of the mount that holds `path` (absolute, without symbolic links to resolve):
    /// the mount whose mount point is the longest prefix of it. `mountinfo` is the file's bytes.
    static func type(of path: FileSystemPath, in mountinfo: [UInt8]) -> String? {
        var best: (length: Int, type: String)?
        let target = path.bytes
        for line in mountinfo.split(separator: newline) {
            // ID parentID major:minor root mountPoint options [optional fields] - type source super
            let fields = line.split(separator: space, omittingEmptySubsequences: false)
            guard fields.count > 7, let separator = fields.firstIndex(of: [UInt8(ascii: "-")][...]),
                separator + 1 < fields.count
            else { continue }
            // A bare "fuse" is a program that named no subtype (bindfs): its source field is
            // whatever it passed, often a path, so the type stays "fuse", unknown.
            let type = String(decoding: unescape(fields[separator + 1]), as: UTF8.self)
            let mountPoint = unescape(fields[4])
            guard isPrefix(mountPoint, of: target), mountPoint.count >= (best?.length ?? -1) else { continue }
            best = (mountPoint.count, type)
        }
        return best?.type
    }

    /// ``type(of:in:)-([UInt8])`` of a table given as text (tests).
    static func type(of path: FileSystemPath, in mountinfo: String) -> String? {
        type(of: path, in: Array(mountinfo.utf8))
    }

    /// One line of the table: a mount's id (unique while it is mounted) and where it is mounted.
    struct Mount: Equatable, Sendable {
        let id: Int
        let mountPoint: FileSystemPath
    }

    /// Every mount of the table, in its order (a mount stacked on another's mount point comes
    /// after it).
    static func mounts(in mountinfo: [UInt8]) -> [Mount] {
        var found: [Mount] = []
        for line in mountinfo.split(separator: newline) {
            let fields = line.split(separator: space, omittingEmptySubsequences: false)
            guard fields.count > 7, let id = Int(String(decoding: fields[0], as: UTF8.self)) else { continue }
            found.append(Mount(id: id, mountPoint: FileSystemPath(bytes: unescape(fields[4]))))
        }
        return found
    }

    /// ``mounts(in:)-([UInt8])`` of a table given as text (tests).
    static func mounts(in mountinfo: String) -> [Mount] {
        mounts(in: Array(mountinfo.utf8))
    }

    /// The mount that holds `path`: the one whose mount point is the longest prefix of it, the
    /// last of those stacked there (the one on top).
    static func mount(of path: FileSystemPath, in mounts: [Mount]) -> Mount? {
        var best: Mount?
        for mount in mounts where isPrefix(mount.mountPoint.bytes, of: path.bytes) {
            if mount.mountPoint.bytes.count >= (best?.mountPoint.bytes.count ?? 0) { best = mount }
        }
        return best
    }

    /// Whether `prefix` is `path` or one of its ancestors, component-wise.
    static func isPrefix(_ prefix: [UInt8], of path: [UInt8]) -> Bool {
        if prefix == [UInt8(ascii: "/")] { return true }
        guard path.count >= prefix.count, Array(path[..<prefix.count]) == prefix else { return false }
        return path.count == prefix.count || path[prefix.count] == UInt8(ascii: "/")
    }

    private static let newline = UInt8(ascii: "\n")
    private static let space = UInt8(ascii: " ")

    /// mountinfo writes space, tab, newline and backslash as a backslash and three octal digits
    /// (`\040`); every other byte, UTF-8 or not, as it is.
    static func unescape(_ field: ArraySlice<UInt8>) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(field.count)
        var index = field.startIndex
        while index < field.endIndex {
            if field[index] == UInt8(ascii: "\\"), index + 3 < field.endIndex,
                let value = octal(field[(index + 1)...(index + 3)])
            {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(field[index])
                index += 1
            }
        }
        return bytes
    }

    /// Three octal digits' value, when they are three octal digits of a byte.
    private static func octal(_ digits: ArraySlice<UInt8>) -> UInt8? {
        var value = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "7") else { return nil }
            value = value * 8 + Int(digit - UInt8(ascii: "0"))
        }
        return value <= 255 ? UInt8(value) : nil
    }
}

extension FileSystemKind {
    /// The kind of the file system that holds the directory at `path`, asked of the kernel.
    static func of(_ path: FileSystemPath, system: System) throws(SyscallError) -> FileSystemKind {
        let magic = try system.fileSystemType(path)
        return of(magic: magic) {
            system.readProcBytes("/proc/self/mountinfo").flatMap { MountTable.type(of: path, in: $0) }
        }
    }
}
