/// The router's kept directories (``KnownDirectory``), by watch descriptor.
///
/// Most directories of a tree are empty (nine in ten of a tree of directories), and a kept
/// directory is an object of 64 bytes even then. So an empty one that nothing has changed since
/// it was stored is kept as one of two objects the table shares among them (one for each value
/// of ``KnownDirectory/suppressesRepeats``, the only state an empty one has), and given an object
/// of its own when the router asks for it to change it: the first event in that directory, a
/// rescan. The shared objects never leave the table: the subscript hands out a directory's own,
/// and ``entries(_:)`` a copy of the entries.
struct KnownDirectories {
    private var table = ByDescriptor<KnownDirectory>()
    private let emptySuppressing = KnownDirectory(entries: NameTable())
    private let emptyReporting: KnownDirectory = {
        let directory = KnownDirectory(entries: NameTable())
        directory.suppressesRepeats = false
        return directory
    }()

    init() {}

    /// The kept directory of `wd`, its own object (made now for an empty one that shared
    /// one); nil when the descriptor has none. Stored: one empty with nothing pending
    /// (``KnownDirectory/isPristine``) is kept as a shared object, so a directory stored is
    /// changed through the subscript, not through a reference kept from before.
    subscript(wd: Int32) -> KnownDirectory? {
        // Inlined: the router asks for one for every event, and a call was 15 instructions more.
        @inline(__always) mutating get {
            guard let directory = table[wd] else { return nil }
            guard directory === emptySuppressing || directory === emptyReporting else { return directory }
            let own = KnownDirectory(entries: NameTable())
            own.suppressesRepeats = directory.suppressesRepeats
            table[wd] = own
            return own
        }
        set {
            guard let directory = newValue else {
                table[wd] = nil
                return
            }
            if directory.isPristine {
                table[wd] = directory.suppressesRepeats ? emptySuppressing : emptyReporting
            } else {
                table[wd] = directory
            }
        }
    }

    /// Keeps `wd`'s directory as a shared object again when it is still `directory` and has
    /// become pristine (a rescan found it empty).
    mutating func share(_ wd: Int32, ifStill directory: KnownDirectory) {
        guard table[wd] === directory, directory.isPristine else { return }
        self[wd] = directory
    }

    /// Whether `wd` has a kept directory.
    func contains(_ wd: Int32) -> Bool { table[wd] != nil }

    /// What the watchers have been told of `wd`'s entries, for reading (a pause's baseline, a
    /// saved state): no object is made for an empty directory.
    func entries(_ wd: Int32) -> NameTable<KnownDirectory.Known>? { table[wd]?.entries }

    /// Whether `wd`'s directory is kept as the table's shared empty object (for tests).
    func isShared(_ wd: Int32) -> Bool {
        guard let directory = table[wd] else { return false }
        return directory === emptySuppressing || directory === emptyReporting
    }

    /// The descriptors with a kept directory, in no particular order.
    var descriptors: [Int32] { table.keys }

    var count: Int { table.count }
}
