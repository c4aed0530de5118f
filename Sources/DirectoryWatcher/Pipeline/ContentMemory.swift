/// What a settling watcher that compares content (``DirectoryWatcher/Settling/comparesContent``)
/// remembers of the files it saw written: a digest of their bytes, taken when a batch is handed
/// over (after the writers' closes), so that a write that left a file's bytes as they were is
/// not reported.
///
/// Only files the watcher saw created or written are remembered: the first write of a file it
/// has never seen written is reported whatever it wrote, since nothing says what the file held
/// before. Pure: the digests come from the caller (``System/contentDigest(of:)``), so tests give
/// their own.
struct ContentMemory {
    /// Past this many files, it forgets them all and starts again (a cache: a forgotten file's
    /// next write is reported).
    static let capacity = 65_536

    private(set) var digests: [FileSystemPath: ContentDigest] = [:]

    /// `batch` less each `modified` of a file whose digest is the one remembered, remembering
    /// the digest of each file created, written or renamed to, and forgetting those removed.
    /// A file whose digest cannot be taken (gone, unreadable, too large) is reported and
    /// forgotten.
    mutating func filter(
        _ batch: [DirectoryChange], digest: (FileSystemPath) -> ContentDigest?
    ) -> [DirectoryChange] {
        var kept: [DirectoryChange] = []
        kept.reserveCapacity(batch.count)
        for change in batch {
            switch change.kind {
            case .modified where !change.isDirectory:
                let now = digest(change.path)
                if let now, digests[change.path] == now { continue }
                remember(change.path, now)
            case .created where !change.isDirectory, .movedIn where !change.isDirectory:
                remember(change.path, digest(change.path))
            case .renamed:
                if let old = change.oldPath { forget(old, below: change.isDirectory) }
                if change.isDirectory {
                    forget(change.path, below: true)
                } else {
                    remember(change.path, digest(change.path))
                }
            case .exchanged, .removed, .movedOut:
                forget(change.path, below: change.isDirectory)
                if let other = change.oldPath { forget(other, below: change.isDirectory) }
            case .rootRemoved, .rootMoved:
                digests = [:]
            default:
                break
            }
            kept.append(change)
        }
        return kept
    }

    private mutating func remember(_ path: FileSystemPath, _ digest: ContentDigest?) {
        guard let digest else {
            digests[path] = nil
            return
        }
        if digests.count >= Self.capacity && digests[path] == nil { digests = [:] }
        digests[path] = digest
    }

    private mutating func forget(_ path: FileSystemPath, below: Bool) {
        digests[path] = nil
        if below && !digests.isEmpty { digests = digests.filter { !$0.key.isBelow(path) } }
    }
}
