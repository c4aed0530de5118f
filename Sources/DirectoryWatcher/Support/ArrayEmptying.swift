extension Array {
    /// `removeAll(keepingCapacity: true)` for the short lists a wake-up empties (a read's events,
    /// the mailboxes to run, the watchers to flush): element by element, inlined, where the standard
    /// library replaces the whole range through its general code, a few hundred instructions
    /// even for one element. Only for a list no one else holds: on shared storage the first
    /// removal would copy every element.
    @inline(__always)
    mutating func removeAllKeepingCapacity() {
        while !isEmpty { removeLast() }
    }
}
