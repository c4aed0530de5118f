/// What the router holds back because it may be the first half of an exchange
/// (`renameat2(RENAME_EXCHANGE)`, ``Router+Exchanges``): the kernel queues an exchange's two
/// halves one after the other, and the loop may read between them. Held until the next event, the
/// end of the wake-up, or ``deadline``.
struct ExchangeHold {
    /// A paired move whose target's name held an entry.
    var move: (from: BackendEvent, to: BackendEvent)?
    /// The handle of the entry the held move moved (a fanotify rename's own, with
    /// `FAN_REPORT_TARGET_FID`): an exchange's halves move two entries, a rename and its way back
    /// one.
    var object: KernelHandle?
    /// A move in with no first half (`IN_MOVED_TO` alone): half an exchange with a place not
    /// watched, perhaps.
    var arrival: BackendEvent?
    /// When what is held stops waiting for the other half, as a rename's first half waits for
    /// its second.
    var deadline: UInt64 = 0

    /// Whether anything is held.
    var isHolding: Bool { move != nil || arrival != nil }
}
