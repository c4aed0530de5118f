/// The directories of one recursive watcher, each with its kernel watch descriptor, known by its
/// parent and its name rather than by its path: renaming or moving a directory inside the tree is
/// one update of that directory, and the paths of everything below it follow (see
/// ``TreeNode/path``). Loop thread only.
final class WatchedTree {
    let root: TreeNode
    /// Every directory of the tree by descriptor, the root included.
    private(set) var nodes = ByDescriptor<TreeNode>()
    /// Moves on at every rename or move inside the tree: a path cached under an older epoch is
    /// built again from the parent's.
    var epoch: Int { renames.count }
    /// The epoch's count, which every node of the tree holds (``TreeNode/path``).
    fileprivate let renames = RenameCount()
    /// Directories a listing found that could not be opened by the path they were found at (an
    /// ancestor renamed meanwhile, most often): tried again, at their parent's new path, after the
    /// next rename inside the tree. `reporting`: their entries are to be reported as created.
    var unreached: [(parent: TreeNode, name: [UInt8], reporting: Bool, foundByRescan: Bool)] = []
    /// Its directories get nodes as they are met (a fanotify tree: one mark covers them all, so
    /// a directory without a node is still seen): a directory renamed inside the tree with no
    /// node has nothing to follow, and is no news of its entries.
    var isLazy = false
    /// The directories that could not be watched for the watch limit (`ENOSPC`) since the
    /// watcher was last told: the error and the first one's path, and how many. The router tells
    /// it once, in one notice, before the batch is handed over (``Router/reportUnwatched()``).
    var unwatched: (error: SyscallError, first: FileSystemPath, count: Int)?
    /// A lazy tree's directories whose listing after readiness found them gone from their path
    /// (an ancestor renamed meanwhile): listed again after the next rename inside the tree.
    var unlisted: [TreeNode] = []

    init(rootPath: FileSystemPath, wd: Int32) {
        root = TreeNode(wd: wd, name: [], parent: nil, rootPath: rootPath, renames: renames)
        nodes[wd] = root
    }

    /// The name each directory met early (``TreeNode/metEarlyIn``) had in the directory its mark
    /// names, by descriptor: few at a time, and stale ones are dropped as they are met.
    var metEarlyNames: [Int32: [UInt8]] = [:]

    /// The departure of `name` from `parent` was routed with no directory of the tree under that
    /// name: a directory met early elsewhere, whose move that was, lost its mark (the move's
    /// arrival, in a directory not watched yet, was never reported to clear it).
    func departed(_ name: ArraySlice<UInt8>, from parent: TreeNode) {
        for (wd, old) in metEarlyNames {
            guard let node = nodes[wd], node.metEarlyIn != -1 else {
                metEarlyNames[wd] = nil
                continue
            }
            if node.metEarlyIn == parent.wd && old[...] == name {
                node.metEarlyIn = -1
                metEarlyNames[wd] = nil
            }
        }
    }

    /// Takes `name` of `parent` out of ``unreached``: what was to be done for it, if it was there.
    func takeUnreached(_ name: ArraySlice<UInt8>, of parent: TreeNode) -> (reporting: Bool, foundByRescan: Bool)? {
        guard let index = unreached.firstIndex(where: { $0.parent === parent && $0.name[...] == name }) else {
            return nil
        }
        let entry = unreached.remove(at: index)
        return (entry.reporting, entry.foundByRescan)
    }

    var count: Int { nodes.count }
    var descriptors: [Int32] { nodes.keys }

    func node(_ wd: Int32) -> TreeNode? { nodes[wd] }

    /// Adds the directory `name` of `parent`, watched as `wd`.
    @discardableResult
    func add(_ name: [UInt8], of parent: TreeNode, wd: Int32) -> TreeNode {
        let node = TreeNode(wd: wd, name: name, parent: parent, rootPath: nil, renames: renames)
        parent.children[name[...]] = node
        nodes[wd] = node
        return node
    }

    /// Moves `node` to be `name` in `parent` (a rename inside the tree).
    func move(_ node: TreeNode, to name: [UInt8], in parent: TreeNode) {
        if let old = node.parent, old.children[node.name[...]] === node { old.children[node.name[...]] = nil }
        node.name = name
        node.parent = parent
        parent.children[name[...]] = node
        renames.count += 1
    }

    /// Removes `node` and everything below it; returns their descriptors, `node`'s first.
    func remove(_ node: TreeNode) -> [Int32] {
        if let parent = node.parent, parent.children[node.name[...]] === node { parent.children[node.name[...]] = nil }
        var removed: [Int32] = []
        var stack = [node]
        while let next = stack.popLast() {
            removed.append(next.wd)
            if nodes[next.wd] === next { nodes[next.wd] = nil }
            stack.append(contentsOf: next.children)
            next.children = TreeChildren()
            next.parent = nil
        }
        return removed
    }
}

/// How many renames and moves a ``WatchedTree`` has seen (its epoch), shared with its nodes.
final class RenameCount {
    @exclusivity(unchecked) var count = 0
}

/// One directory of a ``WatchedTree``.
///
/// A tree has a node for each of its directories, so its fields are laid out to fit glibc's
/// 96-byte chunk (an instance of at most 88 bytes): the two flags sit beside the descriptor, the
/// root's path is its cached path, and what few directories need is in ``Rare``, made on first
/// use (Docs/benchmarks.md, "A tree node in 96 bytes").
final class TreeNode {
    let wd: Int32
    /// The tree's root, whose ``path`` is the one it was given and never built.
    let isRoot: Bool
    /// The watcher was told its name holds a directory new there, which tells a consumer to
    /// forget what it held, and what it holds could not be said then, its path stale
    /// (``Router/treeChanged``): said when its name is tried again (``WatchedTree/unreached``),
    /// unless a walk that met it again at its new path said it first.
    var contentsOwed = false
    fileprivate(set) var name: [UInt8]
    fileprivate(set) weak var parent: TreeNode?
    /// The subdirectories watched, by name.
    fileprivate(set) var children = TreeChildren()
    /// The directory's inode, when known (0 when not): a rescan tells by it whether the name
    /// still holds this directory, or another one since (an exchange, a replacement). An inotify
    /// watch holds the inode while the directory is there (removed while the events were lost, its
    /// number may be given to a directory made since: a listing's birth bound tells them apart).
    var inode: UInt64 = 0
    /// Its tree's epoch (``WatchedTree/epoch``), held strongly: read through a weak reference to
    /// the tree, it was a runtime call for each event below the root.
    private let renames: RenameCount
    /// The root's path, or the path built under ``cachedEpoch``.
    private var cachedPath: FileSystemPath?
    private var cachedEpoch = -1
    private var rare: Rare?

    /// What few directories of a tree need.
    private final class Rare {
        var refused: Set<[UInt8]> = []
        var metEarlyIn: Int32 = -1
    }

    fileprivate init(
        wd: Int32, name: [UInt8], parent: TreeNode?, rootPath: FileSystemPath?, renames: RenameCount
    ) {
        self.wd = wd
        self.isRoot = rootPath != nil
        self.name = name
        self.parent = parent
        self.cachedPath = rootPath
        self.renames = renames
    }

    /// Its subdirectories that could not be opened for want of permission (`EACCES`, `EPERM`),
    /// by name: the watcher was told so once, and each is tried again when its attributes, or
    /// this directory's, change (a `chmod` that makes it readable).
    var refused: Set<[UInt8]> {
        get { rare?.refused ?? [] }
        set {
            if rare == nil, newValue.isEmpty { return }
            rareMade().refused = newValue
        }
    }

    /// Met by a walk at a new path before the event that moved it there (-1 when not): the
    /// descriptor of the directory it was in. Its move, or exchange, when routed, was said.
    var metEarlyIn: Int32 {
        get { rare?.metEarlyIn ?? -1 }
        set {
            if rare == nil, newValue == -1 { return }
            rareMade().metEarlyIn = newValue
        }
    }

    private func rareMade() -> Rare {
        if let rare { return rare }
        let made = Rare()
        rare = made
        return made
    }

    /// The directory's path now: the root's path, or its parent's path and its name. Cached until
    /// the next rename in the tree, so an event costs no walk up to the root. (Inlined: it is
    /// read for every event of the tree, and is most often the root's or the cached one.)
    @inline(__always)
    var path: FileSystemPath {
        if let cachedPath, isRoot || cachedEpoch == renames.count { return cachedPath }
        return pathBuilt()
    }

    /// ``path``, built from the parent's and cached.
    private func pathBuilt() -> FileSystemPath {
        // A node removed from its tree keeps the path it last had.
        guard let parent else { return cachedPath ?? FileSystemPath(bytes: name) }
        let epoch = renames.count
        let path = parent.path.appending(bytes: name[...])
        cachedPath = path
        cachedEpoch = epoch
        return path
    }

    /// ``path``, without caching it or any ancestor's: for a listing of every directory, which
    /// would otherwise leave a path cached for each (a tenth of a tree's memory).
    var uncachedPath: FileSystemPath {
        if let cachedPath, isRoot || cachedEpoch == renames.count { return cachedPath }
        guard let parent else { return cachedPath ?? FileSystemPath(bytes: name) }
        return parent.uncachedPath.appending(bytes: name[...])
    }

    /// Whether ``path`` is cached now (for tests).
    var hasCachedPath: Bool { cachedPath != nil && (isRoot || cachedEpoch == renames.count) }

    func child(_ name: ArraySlice<UInt8>) -> TreeNode? { children[name] }

    /// Whether this is `other` or lies below it.
    func isInside(_ other: TreeNode) -> Bool {
        var node: TreeNode? = self
        while let current = node {
            if current === other { return true }
            node = current.parent
        }
        return false
    }
}

/// A directory's subdirectories in its tree, by name. Most directories have few, kept in an array
/// and found by comparing names: a dictionary for each directory with any was a tenth of a
/// tree's memory (10 subdirectories: 336 bytes a dictionary, 128 an array). Past
/// ``mostInArray`` they are in a dictionary, in an object of its own: an enum of an array or a
/// dictionary takes a byte more than one reference, which pushed a node out of its chunk. Each
/// is kept under its own ``TreeNode/name``, which the tree changes only while the node is out of
/// its parent's.
struct TreeChildren: Sequence {
    /// Beyond this many, a dictionary: finding a name is a directory event's work, not each
    /// event's, so a short scan costs less than a dictionary's memory.
    static let mostInArray = 16

    private enum Storage {
        case few([TreeNode])
        case many(ByName)
    }

    private final class ByName {
        var nodes: [[UInt8]: TreeNode]

        init(_ nodes: [[UInt8]: TreeNode]) { self.nodes = nodes }
    }

    private var storage = Storage.few([])

    init() {}

    var isEmpty: Bool { count == 0 }

    var count: Int {
        switch storage {
        case .few(let nodes): nodes.count
        case .many(let byName): byName.nodes.count
        }
    }

    /// One of them, any.
    var any: TreeNode? {
        switch storage {
        case .few(let nodes): nodes.first
        case .many(let byName): byName.nodes.first?.value
        }
    }

    /// The subdirectory named `name`; setting replaces the one by that name, or removes it (nil).
    subscript(name: ArraySlice<UInt8>) -> TreeNode? {
        get {
            switch storage {
            case .few(let nodes): nodes.first { $0.name[...] == name }
            case .many(let byName): byName.nodes[Array(name)]
            }
        }
        set {
            switch storage {
            case .few(var nodes):
                storage = .few([])  // keeps the array unique: changed in place, not copied
                if let index = nodes.firstIndex(where: { $0.name[...] == name }) {
                    if let newValue { nodes[index] = newValue } else { nodes.remove(at: index) }
                } else if let newValue {
                    nodes.append(newValue)
                }
                storage =
                    nodes.count > Self.mostInArray
                    ? .many(ByName(Dictionary(uniqueKeysWithValues: nodes.map { ($0.name, $0) }))) : .few(nodes)
            case .many(var byName):
                // A copy of these children keeps what it had.
                if !isKnownUniquelyReferenced(&byName) { byName = ByName(byName.nodes) }
                byName.nodes[Array(name)] = newValue
                storage = .many(byName)
            }
        }
    }

    func makeIterator() -> Iterator {
        switch storage {
        case .few(let nodes): .few(nodes.makeIterator())
        case .many(let byName): .many(byName.nodes.values.makeIterator())
        }
    }

    enum Iterator: IteratorProtocol {
        case few(IndexingIterator<[TreeNode]>)
        case many(Dictionary<[UInt8], TreeNode>.Values.Iterator)

        mutating func next() -> TreeNode? {
            switch self {
            case .few(var nodes):
                defer { self = .few(nodes) }
                return nodes.next()
            case .many(var nodes):
                defer { self = .many(nodes) }
                return nodes.next()
            }
        }
    }
}
