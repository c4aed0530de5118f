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

    /// For tests: the epoch as if `count` renames had been made (one short of a wrap, say).
    func pretendRenames(_ count: Int) { renames.count = count }
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
        root = TreeNode(wd: wd, name: [][...], parent: nil, rootPath: rootPath, renames: renames)
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
        add(name[...], of: parent, wd: wd)
    }

    /// Adds the directory `name` of `parent`, watched as `wd`.
    @discardableResult
    func add(_ name: ArraySlice<UInt8>, of parent: TreeNode, wd: Int32) -> TreeNode {
        let node = TreeNode(wd: wd, name: name, parent: parent, rootPath: nil, renames: renames)
        parent.children[name] = node
        nodes[wd] = node
        return node
    }

    /// Moves `node` to be `name` in `parent` (a rename inside the tree).
    func move(_ node: TreeNode, to name: [UInt8], in parent: TreeNode) {
        move(node, to: name[...], in: parent)
    }

    /// Moves `node` to be `name` in `parent` (a rename inside the tree).
    func move(_ node: TreeNode, to name: ArraySlice<UInt8>, in parent: TreeNode) {
        node.parent?.children.remove(node)
        node.setName(name)
        node.parent = parent
        parent.children[name] = node
        renames.count += 1
        // A node keeps the lower half of the epoch it cached its path under: at each wrap every
        // cached path is forgotten, so a stale one never matches.
        if UInt32(truncatingIfNeeded: renames.count) == 0 {
            for wd in nodes.keys { nodes[wd]?.forgetPath() }
        }
    }

    /// Removes `node` and everything below it; returns their descriptors, `node`'s first.
    func remove(_ node: TreeNode) -> [Int32] {
        node.parent?.children.remove(node)
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
/// 96-byte chunk (an instance of at most 88 bytes): a name of up to 15 bytes (most) is kept in
/// the node, with the two flags in its last byte, the root's path is its cached path, and what
/// few directories need is in ``Rare``, made on first use (Docs/benchmarks.md, "A tree node in 96
/// bytes", "A tree directory's name in its node").
final class TreeNode {
    let wd: Int32
    /// The lower half of the tree's epoch when ``cachedPath`` was built (``WatchedTree/move(_:to:in:)``
    /// forgets every cached path when it wraps).
    private var cachedEpoch: UInt32 = 0
    /// The name's first 8 bytes, and its next 7 with ``meta`` in the top byte: a name in an array
    /// of its own took a 48-byte chunk more for each directory.
    private var nameHead: UInt64 = 0
    private var nameTail: UInt64 = 0
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
    private var rare: Rare?

    /// What few directories of a tree need.
    private final class Rare {
        var refused: Set<[UInt8]> = []
        var metEarlyIn: Int32 = -1
        /// A name longer than the node keeps.
        var longName: [UInt8] = []
    }

    /// The top byte of ``nameTail``: the name's length when kept in the node, and the flags.
    private enum Meta {
        static let length: UInt8 = 0x0F
        static let long: UInt8 = 0x10
        static let root: UInt8 = 0x20
        static let contentsOwed: UInt8 = 0x40
    }

    /// The longest name kept in the node.
    static let mostInline = 15

    private var meta: UInt8 {
        get { UInt8(truncatingIfNeeded: nameTail >> 56) }
        set { nameTail = nameTail & 0x00FF_FFFF_FFFF_FFFF | UInt64(newValue) << 56 }
    }

    /// The tree's root, whose ``path`` is the one it was given and never built.
    var isRoot: Bool { meta & Meta.root != 0 }

    /// The watcher was told its name holds a directory new there, which tells a consumer to
    /// forget what it held, and what it holds could not be said then, its path stale
    /// (``Router/treeChanged``): said when its name is tried again (``WatchedTree/unreached``),
    /// unless a walk that met it again at its new path said it first.
    var contentsOwed: Bool {
        get { meta & Meta.contentsOwed != 0 }
        set { meta = newValue ? meta | Meta.contentsOwed : meta & ~Meta.contentsOwed }
    }

    /// Its name in its parent (empty for the root).
    var name: [UInt8] { Array(nameBytes) }

    /// Its name's bytes, read where the node keeps them: no array is made.
    var nameBytes: TreeNodeName {
        meta & Meta.long != 0
            ? TreeNodeName(long: rare!.longName)
            : TreeNodeName(head: nameHead, tail: nameTail, count: Int(meta & Meta.length))
    }

    /// Whether its name is `other`.
    func hasName(_ other: ArraySlice<UInt8>) -> Bool {
        if meta & Meta.long != 0 { return rare!.longName[...] == other }
        guard other.count == Int(meta & Meta.length) else { return false }
        var (head, tail): (UInt64, UInt64) = (0, 0)
        for (offset, byte) in other.enumerated() {
            if offset < 8 { head |= UInt64(byte) << (offset * 8) } else { tail |= UInt64(byte) << ((offset - 8) * 8) }
        }
        return head == nameHead && tail == nameTail & 0x00FF_FFFF_FFFF_FFFF
    }

    fileprivate func setName(_ name: ArraySlice<UInt8>) {
        let flags = meta & (Meta.root | Meta.contentsOwed)
        (nameHead, nameTail) = (0, 0)
        if name.count > Self.mostInline {
            rareMade().longName = Array(name)
            meta = flags | Meta.long
            return
        }
        if let rare, !rare.longName.isEmpty { rare.longName = [] }
        for (offset, byte) in name.enumerated() {
            if offset < 8 {
                nameHead |= UInt64(byte) << (offset * 8)
            } else {
                nameTail |= UInt64(byte) << ((offset - 8) * 8)
            }
        }
        meta = flags | UInt8(name.count)
    }

    /// Forgets the cached path (the root keeps its own).
    fileprivate func forgetPath() {
        if !isRoot { cachedPath = nil }
    }

    fileprivate init(
        wd: Int32, name: ArraySlice<UInt8>, parent: TreeNode?, rootPath: FileSystemPath?, renames: RenameCount
    ) {
        self.wd = wd
        self.parent = parent
        self.cachedPath = rootPath
        self.renames = renames
        setName(name)
        if rootPath != nil { meta |= Meta.root }
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
        if let cachedPath, isRoot || cachedEpoch == UInt32(truncatingIfNeeded: renames.count) { return cachedPath }
        return pathBuilt()
    }

    /// ``path``, built from the parent's and cached.
    private func pathBuilt() -> FileSystemPath {
        // A node removed from its tree keeps the path it last had.
        guard let parent else { return cachedPath ?? FileSystemPath(bytes: name) }
        let path = parent.path.appending(bytes: nameBytes)
        cachedPath = path
        cachedEpoch = UInt32(truncatingIfNeeded: renames.count)
        return path
    }

    /// ``path``, without caching it or any ancestor's: for a listing of every directory, which
    /// would otherwise leave a path cached for each (a tenth of a tree's memory).
    var uncachedPath: FileSystemPath {
        if let cachedPath, isRoot || cachedEpoch == UInt32(truncatingIfNeeded: renames.count) { return cachedPath }
        guard let parent else { return cachedPath ?? FileSystemPath(bytes: name) }
        return parent.uncachedPath.appending(bytes: nameBytes)
    }

    /// Whether ``path`` is cached now (for tests).
    var hasCachedPath: Bool {
        cachedPath != nil && (isRoot || cachedEpoch == UInt32(truncatingIfNeeded: renames.count))
    }

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
            case .few(let nodes): nodes.first { $0.hasName(name) }
            case .many(let byName): byName.nodes[Array(name)]
            }
        }
        set {
            switch storage {
            case .few(var nodes):
                storage = .few([])  // keeps the array unique: changed in place, not copied
                if let index = nodes.firstIndex(where: { $0.hasName(name) }) {
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

    /// Removes `node` from among them, if it is there.
    mutating func remove(_ node: TreeNode) {
        switch storage {
        case .few(var nodes):
            guard let index = nodes.firstIndex(where: { $0 === node }) else { return }
            storage = .few([])  // keeps the array unique: changed in place, not copied
            nodes.remove(at: index)
            storage = .few(nodes)
        case .many:
            let name = node.name[...]
            if self[name] === node { self[name] = nil }
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

/// A tree directory's name, read where its node keeps it (``TreeNode/nameBytes``).
struct TreeNodeName: RandomAccessCollection {
    private let head: UInt64
    private let tail: UInt64
    private let long: [UInt8]?
    let count: Int

    init(head: UInt64, tail: UInt64, count: Int) {
        (self.head, self.tail, self.long, self.count) = (head, tail, nil, count)
    }

    init(long: [UInt8]) {
        (self.head, self.tail, self.long, self.count) = (0, 0, long, long.count)
    }

    var startIndex: Int { 0 }
    var endIndex: Int { count }

    subscript(position: Int) -> UInt8 {
        if let long { return long[position] }
        let word = position < 8 ? head : tail
        return UInt8(truncatingIfNeeded: word >> ((position & 7) * 8))
    }
}
