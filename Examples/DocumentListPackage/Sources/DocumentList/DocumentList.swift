import DirectoryWatcher
import Foundation

/// The sample's document list: the documents (regular files) of one folder, kept up to date from
/// the watcher's changes alone. What a table view of files would show.
///
/// The list starts from the names given (the folder's listing when the app opens it) and is
/// then kept from the changes: a creation adds a name, a removal takes it out, a rename replaces
/// it. After an overflow, the watcher's rescan reports what was missed, so the list stays exact
/// with no listing of its own. When the folder itself goes, the list empties and says so.
///
/// How it watches is given to it (`watch`), so that its tests can hand it a simulated watcher:
/// the app passes nothing and gets ``DirectoryWatcher/watchFolder(path:options:delegate:queue:)``.
public final class DocumentList: DirectoryWatcherDelegate, @unchecked Sendable {
    /// How a list starts watching its folder.
    public typealias Watch = (_ path: String, _ delegate: any DirectoryWatcherDelegate) throws -> DirectoryWatcher

    private let lock = NSLock()
    private var documents: Set<String>
    private var gone = false
    private var unreadable: [String] = []
    private var watcher: DirectoryWatcher?
    /// Called after each batch, on the watcher's thread: the app refreshes its view here.
    public var onChange: (@Sendable () -> Void)?

    /// Starts watching `folder`, whose documents are `names` now.
    /// - Throws: The watcher's ``DirectoryWatcherError`` (the folder is missing, not a folder,
    ///   not readable).
    public init(
        folder: String, names: [String] = [],
        watch: Watch = { path, delegate in try DirectoryWatcher.watchFolder(path: path, delegate: delegate) }
    ) throws {
        documents = Set(names)
        watcher = try watch(folder, self)
    }

    deinit {
        watcher?.invalidate()
    }

    /// The documents' names, sorted.
    public var names: [String] { lock.withLock { documents.sorted() } }

    /// Whether the folder was removed or moved away (the list is then empty, and stays so).
    public var folderIsGone: Bool { lock.withLock { gone } }

    /// The folders inside that could not be read, by path (a tree's; this list watches one
    /// folder, so only a failed rescan puts one here).
    public var problems: [String] { lock.withLock { unreadable } }

    /// The watcher, for a test to wait on (``DirectoryWatcher/barrier()``).
    public var folderWatcher: DirectoryWatcher? { lock.withLock { watcher } }

    public func directoryWatcher(_ watcher: DirectoryWatcher, didObserve changes: [DirectoryChange]) {
        lock.withLock {
            for change in changes {
                let name = change.path.lastComponent.description
                switch change.kind {
                case .created, .movedIn:
                    if !change.isDirectory { documents.insert(name) }
                case .removed, .movedOut:
                    documents.remove(name)
                case .renamed:
                    if let old = change.oldPath { documents.remove(old.lastComponent.description) }
                    if !change.isDirectory { documents.insert(name) }
                case .exchanged:
                    break  // the same two names, each still there
                case .rootRemoved, .rootMoved:
                    documents = []
                    gone = true
                case .failed:
                    unreadable.append(change.path.description)
                default:
                    break  // modified, attributes, overflow: the rescan's findings follow an overflow
                }
            }
        }
        onChange?()
    }
}
