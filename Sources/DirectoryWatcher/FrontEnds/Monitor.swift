/// Something that can be started and stopped: XestiMonitors' shape, so that an app starts and
/// stops a set of monitors together (``MonitorGroup``).
///
/// ``DirectoryWatcher`` conforms: ``DirectoryWatcher/startMonitoring()`` puts its watch in place,
/// ``DirectoryWatcher/stopMonitoring()`` removes it, and it can start again.
///
/// ```swift
/// let monitors = MonitorGroup([
///     try DirectoryWatcher(path: "Inbox", delegate: self),
///     try DirectoryWatcher(filePath: "settings.json", delegate: self),
/// ])
/// try monitors.startMonitoring()  // both, or neither
/// ```
public protocol Monitor: AnyObject {
    /// Whether the monitor is started.
    var isMonitoring: Bool { get }

    /// Starts monitoring. Returns true when it started, false when it was monitoring already.
    @discardableResult
    func startMonitoring() throws -> Bool

    /// Stops monitoring. Returns true when it stopped, false when it was not monitoring.
    @discardableResult
    func stopMonitoring() -> Bool
}

extension DirectoryWatcher: Monitor {}

/// Monitors started and stopped together, in the order given (stopped in reverse), as an array
/// of XestiMonitors' monitors is. A group is itself a ``Monitor``, so groups nest.
///
/// Starting is all or nothing: when a monitor fails to start, the ones this call started are
/// stopped again before the error is thrown, so the group is left as it was. Monitors that were
/// already monitoring are left alone, by starting and by undoing.
///
/// A group is not `Sendable`: start and stop it from one thread or task at a time (its members
/// may be used from anywhere, as their own types allow).
public final class MonitorGroup: Monitor {
    /// The monitors, in the order they start.
    public let monitors: [any Monitor]

    public init(_ monitors: [any Monitor]) {
        self.monitors = monitors
    }

    /// True while any member monitors.
    public var isMonitoring: Bool { monitors.contains { $0.isMonitoring } }

    /// Starts every member in order. Returns true when it started any.
    ///
    /// - Throws: The first member's error; the members this call had started are stopped first.
    @discardableResult
    public func startMonitoring() throws -> Bool {
        var started: [any Monitor] = []
        for monitor in monitors {
            do {
                if try monitor.startMonitoring() { started.append(monitor) }
            } catch {
                for monitor in started.reversed() { monitor.stopMonitoring() }
                throw error
            }
        }
        return !started.isEmpty
    }

    /// Stops every member, the last started first. Returns true when it stopped any.
    @discardableResult
    public func stopMonitoring() -> Bool {
        var stopped = false
        for monitor in monitors.reversed() where monitor.stopMonitoring() { stopped = true }
        return stopped
    }
}
