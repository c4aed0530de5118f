import CBenchSupport
import CInotifyFloor
import Glibc

/// How much work each measurement does.
struct Configuration {
    var rounds = 5
    var latencyOperations = 2_000
    /// Operations before measuring latency: first-touch page faults, dispatch threads starting.
    var latencyWarmUp = 50
    /// Files written and closed one at a time under a settled watcher, and its quiet period.
    var settledOperations = 200
    var settledQuietMilliseconds = 20
    var burstSize = 100_000
    var treeSizes = [10_000, 100_000]
    var watcherCount = 1_000
    /// Watchers whose delegates take 2 ms each, for the thread bound.
    var slowWatcherCount = 1_000
    var snapshotEntries = 100_000
    /// Quiet time before counting idle wake-ups, and the time counted.
    var idleSettle = 1.0
    var idleWindow = 3.0
    var quick = false
    var peers = false
    var outputDirectory: String? = "Docs"
    var scratchParent: String?
    /// A `dirwatch` linked with `--static-swift-stdlib`, measured as one more peer with `--peers`.
    var staticDirwatch: String?

    static let quick = Configuration(
        rounds: 2, latencyOperations: 300, latencyWarmUp: 20, settledOperations: 20, settledQuietMilliseconds: 20,
        burstSize: 10_000, treeSizes: [1_000, 10_000],
        watcherCount: 1_000, slowWatcherCount: 200, snapshotEntries: 10_000, idleSettle: 0.5, idleWindow: 1.0,
        quick: true, peers: false,
        outputDirectory: nil, scratchParent: nil)
}

/// What is measured in every round, each in a child process running this same executable.
enum Contender: String, CaseIterable {
    /// The library as most code uses it: default options (`Delivery.automatic`: callbacks on the
    /// thread that read the change, a standby for callbacks that block).
    case library
    /// The library with callbacks handed to a Dispatch queue (`Delivery.queue`), the default of
    /// the first releases: for comparison.
    case libraryQueue
    /// The C floor.
    case floor
    /// The C floor with the library's shape: a reading thread handing each read to a delivery
    /// thread. Not a goal, a diagnostic: it separates the cost of the hop from that of the code.
    case handoff
}

/// The parent side: makes the load, starts the children, collects their figures.
final class Bench {
    let configuration: Configuration
    let executable: String
    let scratch: String
    /// The rows of the table, once `run()` has measured them; the peers mode adds its columns.
    var figures: [Figure] = []
    /// The floor with a hand-off, for the same figures: (key of the figure, values per round).
    private(set) var handoff: [String: [Double]] = [:]
    /// The trees made for recursive setup, kept for the peers until the scratch directory goes.
    private(set) var treeRoots: [Int: String] = [:]
    /// Why this process cannot watch on fanotify (not root, say), once a child has said so: the
    /// fanotify rows then say it instead of a figure.
    private(set) var fanotifyUnavailable: String?

    init(configuration: Configuration) throws(BenchError) {
        self.configuration = configuration
        var path = [CChar](repeating: 0, count: Int(PATH_MAX))
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        guard length > 0 else { throw .system("readlink", "/proc/self/exe") }
        executable = String(decoding: path[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let parent = configuration.scratchParent ?? Self.defaultScratchParent()
        var template = Array("\(parent)/dirwatch-bench.XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else { throw .system("mkdtemp", parent) }
        scratch = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A tmpfs when there is one: creating a file there costs ~10 µs against ~200 µs on a
    /// journaling disk of a virtual machine, so the load generator, not the disk, sets the pace,
    /// and a burst is a burst. inotify's own work is the same on either.
    private static func defaultScratchParent() -> String {
        // /proc/mounts lines: "tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0"
        let mounts = readText("/proc/mounts")?.split(separator: "\n").map { $0.split(separator: " ") } ?? []
        if mounts.contains(where: { $0.count > 2 && $0[1] == "/dev/shm" && $0[2] == "tmpfs" })
            && access("/dev/shm", W_OK) == 0
        {
            return "/dev/shm"
        }
        return getenv("TMPDIR").map { String(cString: $0) } ?? P_tmpdir
    }

    deinit {
        Files.remove(scratch)
    }

    func log(_ message: String) {
        writeAll(message + "\n", to: 2)
    }

    func child(_ arguments: [String], reports: Bool = false) throws(BenchError) -> ChildProcess {
        try ChildProcess(
            name: "child \(arguments[0])", executable: executable,
            arguments: ["dirwatch-bench", "--child"] + arguments, reports: reports)
    }

    // MARK: - The run

    func run() throws(BenchError) {
        let c = configuration
        log("scratch directory: \(scratch)")
        let manyParent = "\(scratch)/many"
        try Files.makeDirectory(manyParent)
        for index in 0..<c.watcherCount { try Files.makeDirectory("\(manyParent)/\(index)") }

        var latency50: [Contender: [Double]] = [:]
        var latency99: [Contender: [Double]] = [:]
        /// The floor's latencies measured beside each contender.
        var floorLatency50: [Contender: [Double]] = [:]
        var floorLatency99: [Contender: [Double]] = [:]
        /// The library's p50 over the creates it reported before its floor did, and the floor's
        /// over those it reported first: on two cores the reader woken second waits for a core,
        /// so the plain ratio follows who the kernel woke first (Docs/benchmarks.md).
        var latencyFirst50: [Double] = []
        var floorLatencyFirst50: [Double] = []
        var idle: [Contender: [Double]] = [:]
        var cpu: [Contender: [Double]] = [:]
        var lost: [Contender: [Double]] = [:]
        var overflows: [Contender: [Double]] = [:]
        var resident: [Contender: [Double]] = [:]
        var footprints: [Contender: [[String: Double]]] = [:]
        var slowThreads: [Contender: [Double]] = [:]
        var fanotifyCPU: [Double] = []
        var fanotifyFloorCPU: [Double] = []
        var fanotifyLost: [Double] = []
        var fanotifyOverflows: [Double] = []
        var outsideCPU: [Double] = []
        var outsideChanges: [Double] = []
        var outsideOverflows: [Double] = []
        var trees: [Int: [Double]] = [:]
        var floorWatches: [Int: [Double]] = [:]
        var libraryTrees: [Int: [Double]] = [:]
        var fanotifyTrees: [Int: [Double]] = [:]
        var fanotifyWatches: [Int: [Double]] = [:]
        var treeHeap: [Double] = []
        var settled50: [Double] = []
        var settled99: [Double] = []
        var closes50: [Double] = []
        var closes99: [Double] = []
        var contentSettled50: [Double] = []
        var contentCloses50: [Double] = []

        for round in 0..<c.rounds {
            // Alternate who goes first, so neither always gets the warmer caches.
            let order: [Contender] =
                round % 2 == 0 ? [.floor, .library, .libraryQueue] : [.libraryQueue, .library, .floor]
            let watching = round % 2 == 0 ? order + [.handoff] : [.handoff] + order
            // Latency is paired: each contender watches the same directory as a floor of its own,
            // at the same time, and both report every file; the ratio compares the same events.
            for contender in watching where contender != .floor {
                log("round \(round + 1)/\(c.rounds): \(contender) beside the floor: latency and idle wake-ups")
                let (samples, floorSamples, wakeUps, floorWakeUps) = try pairedLatencyAndIdle(contender, round: round)
                latency50[contender, default: []].append(percentile(samples, 0.50) / 1000)
                latency99[contender, default: []].append(percentile(samples, 0.99) / 1000)
                idle[contender, default: []].append(wakeUps)
                floorLatency50[contender, default: []].append(percentile(floorSamples, 0.50) / 1000)
                floorLatency99[contender, default: []].append(percentile(floorSamples, 0.99) / 1000)
                if contender == .library {
                    idle[.floor, default: []].append(floorWakeUps)
                    let pairs = zip(samples, floorSamples)
                    let first = pairs.filter { $0.0 < $0.1 }.map(\.0)
                    let floorFirst = pairs.filter { $0.1 <= $0.0 }.map(\.1)
                    if !first.isEmpty && !floorFirst.isEmpty {
                        latencyFirst50.append(percentile(first, 0.50) / 1000)
                        floorLatencyFirst50.append(percentile(floorFirst, 0.50) / 1000)
                    }
                }
            }
            log("round \(round + 1)/\(c.rounds): settled library beside the floor: a writer's close → callback")
            let (settled, closes) = try settledLatency(round: round)
            settled50.append(percentile(settled, 0.50) / 1000)
            settled99.append(percentile(settled, 0.99) / 1000)
            closes50.append(percentile(closes, 0.50) / 1000)
            closes99.append(percentile(closes, 0.99) / 1000)
            log("round \(round + 1)/\(c.rounds): settled library comparing content beside the floor")
            let (content, contentCloses) = try settledLatency(round: round, comparingContent: true)
            contentSettled50.append(percentile(content, 0.50) / 1000)
            contentCloses50.append(percentile(contentCloses, 0.50) / 1000)
            for contender in watching {
                log("round \(round + 1)/\(c.rounds): \(contender): burst of \(format(Double(c.burstSize))) creates")
                let burst = try burst(contender, round: round)
                cpu[contender, default: []].append(burst.cpuPerChange / 1000)
                lost[contender, default: []].append(Double(c.burstSize - burst.created))
                overflows[contender, default: []].append(Double(burst.overflows))
                resident[contender, default: []].append(Double(burst.residentKiB) / 1024)
                // The library again, right after its inotify burst: a recursive watcher on fanotify.
                guard contender == .library, fanotifyUnavailable == nil else { continue }
                log(
                    "round \(round + 1)/\(c.rounds): library on fanotify: burst of \(format(Double(c.burstSize))) creates"
                )
                // Beside it, in alternating order, the same burst through a bare fanotify reader.
                var fanotifyResult: BurstResult?
                var floorResult: BurstResult?
                for floorFirst in round % 2 == 0 ? [true, false] : [false, true] {
                    if floorFirst {
                        log("round \(round + 1)/\(c.rounds): floor on fanotify: the same burst")
                        floorResult = try fanotifyBurst(round: round, floor: true)
                    } else {
                        fanotifyResult = try fanotifyBurst(round: round)
                    }
                    if fanotifyUnavailable != nil { break }
                }
                if let floorResult { fanotifyFloorCPU.append(floorResult.cpuPerChange / 1000) }
                guard let fanotify = fanotifyResult else { continue }
                fanotifyCPU.append(fanotify.cpuPerChange / 1000)
                fanotifyLost.append(Double(c.burstSize - fanotify.created))
                fanotifyOverflows.append(Double(fanotify.overflows))
                log(
                    "round \(round + 1)/\(c.rounds): library on fanotify: burst of \(format(Double(c.burstSize))) "
                        + "creates outside its tree")
                guard let outside = try fanotifyOutsideBurst(round: round) else { continue }
                outsideCPU.append(outside.cpuPerChange / 1000)
                outsideChanges.append(Double(outside.changes))
                outsideOverflows.append(Double(outside.overflows))
            }
            for contender in order {
                log("round \(round + 1)/\(c.rounds): \(contender): \(format(Double(c.watcherCount))) watchers")
                footprints[contender, default: []].append(try many(contender, parent: manyParent))
            }
            for contender in order where contender != .floor {
                log(
                    "round \(round + 1)/\(c.rounds): \(contender): \(format(Double(c.slowWatcherCount))) "
                        + "watchers with 2 ms delegates")
                slowThreads[contender, default: []].append(try slow(contender, parent: manyParent))
            }
        }
        for size in c.treeSizes {
            let root = "\(scratch)/tree-\(size)"
            log("making a tree of \(format(Double(size))) directories")
            try Files.makeTree(at: root, directories: size)
            for round in 0..<c.rounds {
                log("round \(round + 1)/\(c.rounds): floor: recursive setup over \(format(Double(size)))")
                let floor = try floorTree(root: root)
                trees[size, default: []].append(floor.nanoseconds / 1e6)
                floorWatches[size, default: []].append(floor.watches)
                log("round \(round + 1)/\(c.rounds): library: recursive setup over \(format(Double(size)))")
                if let tree = try libraryTree(root: root, directories: size, fanotify: false) {
                    libraryTrees[size, default: []].append(tree.nanoseconds / 1e6)
                    if size == c.treeSizes.last { treeHeap.append(tree.heapPerDirectory) }
                }
                guard fanotifyUnavailable == nil else { continue }
                log("round \(round + 1)/\(c.rounds): library on fanotify: recursive setup over \(format(Double(size)))")
                if let tree = try libraryTree(root: root, directories: size, fanotify: true) {
                    fanotifyTrees[size, default: []].append(tree.nanoseconds / 1e6)
                    fanotifyWatches[size, default: []].append(tree.watches)
                }
            }
            treeRoots[size] = root
        }
        let (snapshot, floorListing, librarySnapshot, libraryListing, stateStart, stateBytes) = try snapshots()
        let (pollCPU, floorPollCPU, pollWakeUps) = try polling()

        func both(_ values: [Contender: [Double]], _ library: Contender = .library) -> (Measured, Measured) {
            (.values(values[library] ?? []), .values(values[.floor] ?? []))
        }
        /// A latency beside the floor measured with it.
        func paired(_ values: [Contender: [Double]], _ floor: [Contender: [Double]], _ library: Contender = .library)
            -> (Measured, Measured)
        {
            (.values(values[library] ?? []), .values(floor[library] ?? []))
        }
        func footprint(_ key: String, perWatch: Bool = false, _ library: Contender = .library) -> (Measured, Measured) {
            let divisor = perWatch ? Double(c.watcherCount) : 1
            return (
                .values((footprints[library] ?? []).map { ($0[key] ?? 0) / divisor }),
                .values((footprints[.floor] ?? []).map { ($0[key] ?? 0) / divisor })
            )
        }
        let onQueue = ", callbacks on a Dispatch queue (Delivery.queue)"
        handoff = [
            "latency50": latency50[.handoff] ?? [], "latency99": latency99[.handoff] ?? [],
            "cpu": cpu[.handoff] ?? [], "idle": idle[.handoff] ?? [],
        ]
        let burstName = "\(format(Double(c.burstSize))) creates"
        let watchers = "\(format(Double(c.watcherCount))) watchers"
        let slowWatchers = "\(format(Double(c.slowWatcherCount))) watchers"
        func figure(_ key: String, _ name: String, _ unit: String, _ measured: (Measured, Measured), _ goal: Goal)
            -> Figure
        {
            Figure(key: key, name: name, unit: unit, library: measured.0, floor: measured.1, goal: goal)
        }
        /// The library's values on fanotify, or why there are none.
        func onFanotify(_ values: [Double]) -> Measured {
            fanotifyUnavailable.map { .notAvailable($0) } ?? .values(values)
        }
        figures = [
            figure(
                "latency50", "Latency, file created → callback, p50", "µs", paired(latency50, floorLatency50),
                .ratioAtMost(1.2)),
            figure(
                "latency50-first",
                "Latency, file created → callback, p50, each over the creates it reported first (like for like: "
                    + "the reader woken second waits for a core)", "µs",
                (.values(latencyFirst50), .values(floorLatencyFirst50)), .none),
            figure(
                "latency50-queue", "Latency, file created → callback, p50\(onQueue)", "µs",
                paired(latency50, floorLatency50, .libraryQueue), .none),
            figure(
                "latency99", "Latency, file created → callback, p99", "µs", paired(latency99, floorLatency99), .none),
            figure(
                "latency99-queue", "Latency, file created → callback, p99\(onQueue)", "µs",
                paired(latency99, floorLatency99, .libraryQueue), .none),
            figure(
                "settled50",
                "Settled: a writer's close → callback, beyond the \(c.settledQuietMilliseconds) ms quiet period, p50 "
                    + "(floor: close → IN_CLOSE_WRITE read)", "µs", (.values(settled50), .values(closes50)),
                .atMost(1000)),
            figure(
                "settled99",
                "Settled: a writer's close → callback, beyond the \(c.settledQuietMilliseconds) ms quiet period, p99 "
                    + "(floor: close → IN_CLOSE_WRITE read)", "µs", (.values(settled99), .values(closes99)), .none),
            figure(
                "settled50-content",
                "Settled, comparing content (each 4 KiB file read when its batch is due): a writer's close → "
                    + "callback, beyond the \(c.settledQuietMilliseconds) ms quiet period, p50 (floor: close → "
                    + "IN_CLOSE_WRITE read)", "µs", (.values(contentSettled50), .values(contentCloses50)), .none),
            figure("cpu", "CPU per change, burst of \(burstName)", "µs", both(cpu), .ratioAtMost(1.5)),
            figure(
                "cpu-queue", "CPU per change, burst of \(burstName)\(onQueue)", "µs", both(cpu, .libraryQueue),
                .none),
            figure(
                "cpu-fanotify", "CPU per change, burst of \(burstName), fanotify", "µs",
                (onFanotify(fanotifyCPU), .values(cpu[.floor] ?? [])), .ratioAtMost(1.3)),
            // What fanotify itself costs: the same burst through one mark, read by a bare reader.
            figure(
                "cpu-fanotify-floor",
                "CPU per change, burst of \(burstName), fanotify, against a bare fanotify reader (floor: one mark "
                    + "as the library makes it, each record's directory handle compared and path rebuilt)", "µs",
                (onFanotify(fanotifyCPU), onFanotify(fanotifyFloorCPU)), .none),
            figure(
                "cpu-fanotify-kernel",
                "CPU per change, burst of \(burstName): the bare fanotify reader (in the library's column) against "
                    + "the bare inotify reader (floor): what the kernel's fanotify costs beyond inotify", "µs",
                (onFanotify(fanotifyFloorCPU), .values(cpu[.floor] ?? [])), .none),
            figure("lost", "Changes lost in the burst", "changes", both(lost), .atMost(0)),
            figure(
                "lost-queue", "Changes lost in the burst\(onQueue)", "changes", both(lost, .libraryQueue), .atMost(0)),
            figure(
                "lost-fanotify", "Changes lost in the burst, fanotify", "changes",
                (onFanotify(fanotifyLost), .values(lost[.floor] ?? [])), .atMost(0)),
            figure("overflows", "Overflow notices in the burst", "notices", both(overflows), .none),
            figure(
                "burst-resident", "Resident memory after the burst (floor: its child, a Swift program too)", "MB",
                both(resident), .none),
            figure(
                "overflows-fanotify", "Overflow notices in the burst, fanotify", "notices",
                (onFanotify(fanotifyOverflows), .values(overflows[.floor] ?? [])), .none),
            // The mark covers the whole file system: a burst beside the tree is read and dropped.
            // The floor watches the burst's own directory, so its figure is a change it reports.
            figure(
                "outside-cpu-fanotify",
                "CPU per event outside the tree, fanotify: a burst of \(burstName) beside a quiet tree "
                    + "(floor: per change, watching the burst)", "µs",
                (onFanotify(outsideCPU), .values(cpu[.floor] ?? [])), .none),
            figure(
                "outside-changes-fanotify", "Changes reported for a burst of \(burstName) outside the tree, fanotify",
                "changes", (onFanotify(outsideChanges), .notAvailable("watches no tree")), .atMost(0)),
            figure(
                "outside-overflows-fanotify",
                "Overflow notices for a burst of \(burstName) outside the tree, fanotify", "notices",
                (onFanotify(outsideOverflows), .notAvailable("watches no tree")), .atMost(0)),
        ]
        for size in c.treeSizes {
            // Keys of the fanotify rows do not start with "tree-": the peers fill those.
            figures += [
                figure(
                    "tree-\(size)", "Recursive setup, \(format(Double(size))) directories", "ms",
                    (.values(libraryTrees[size] ?? []), .values(trees[size] ?? [])), .ratioAtMost(1.0)),
                figure(
                    "fanotify-tree-\(size)", "Recursive setup, \(format(Double(size))) directories, fanotify", "ms",
                    (onFanotify(fanotifyTrees[size] ?? []), .values(trees[size] ?? [])),
                    size >= 100_000 ? .ratioAtMost(0.1) : .none),
            ]
        }
        if let largest = c.treeSizes.last {
            figures.append(
                figure(
                    "fanotify-watches",
                    "Recursive setup, \(format(Double(largest))) directories, fanotify: inotify watches used",
                    "watches", (onFanotify(fanotifyWatches[largest] ?? []), .values(floorWatches[largest] ?? [])),
                    .atMost(0)))
        }
        if let largest = c.treeSizes.last {
            figures.append(
                figure(
                    "tree-memory", "Memory per directory of a watched tree of \(format(Double(largest))) (heap)",
                    "bytes",
                    (.values(treeHeap), .notAvailable("keeps nothing per directory")), .none))
        }
        figures += [
            figure("memory", "Memory per watched directory (heap)", "bytes", footprint("heap", perWatch: true), .none),
            figure(
                "snapshot", "Memory per snapshot entry (heap)", "bytes", (.values(librarySnapshot), .values(snapshot)),
                .none),
            figure(
                "listing",
                "Listing \(format(Double(c.snapshotEntries))) entries (watching starts; a rescan lists the same)", "ms",
                (.values(libraryListing), .values(floorListing)), .none),
            figure(
                "state-start",
                "Starting from a saved state of \(format(Double(c.snapshotEntries))) entries (read, list, compare; floor: its listing)",
                "ms", (.values(stateStart), .values(floorListing)), .ratioAtMost(1.2)),
            figure(
                "state-bytes", "Saved state file per entry (names of 12 to 18 bytes)", "bytes",
                (.values(stateBytes), .notAvailable("keeps no state")), .none),
            figure("idle", "Idle wake-ups", "per second", both(idle), .atMost(0)),
            figure(
                "poll-cpu",
                "Polling: CPU per poll of 10,000 entries (floor: its listing, getdents64 and a stat per entry)", "ms",
                (.values(pollCPU), .values(floorPollCPU)), .none),
            figure(
                "poll-idle", "Polling: idle wake-ups of a watcher polling every 100 ms (one per interval)",
                "per second", (.values(pollWakeUps), .notAvailable("does not poll")), .atMost(12)),
            figure("threads", "\(watchers): threads added", "threads", footprint("threads"), .atMost(1)),
            figure(
                "threads-queue", "\(watchers): threads added\(onQueue)", "threads", footprint("threads", .libraryQueue),
                .none),
            figure(
                "slow", "\(slowWatchers) with 2 ms delegates, 2 bursts: most threads added", "threads",
                (.values(slowThreads[.library] ?? []), .notAvailable("no callbacks")), .atMost(4)),
            figure(
                "slow-queue", "\(slowWatchers) with 2 ms delegates, 2 bursts: most threads added\(onQueue)",
                "threads", (.values(slowThreads[.libraryQueue] ?? []), .notAvailable("no callbacks")), .none),
            figure("inotify", "\(watchers): inotify instances", "instances", footprint("inotify"), .atMost(1)),
            figure("descriptors", "\(watchers): descriptors added", "descriptors", footprint("descriptors"), .none),
            figure("resident", "\(watchers): resident memory added", "KiB", footprint("residentKiB"), .none),
        ]
    }

    // MARK: - Measurements

    /// Runs `contender` and a floor on one directory at the same time, creates files one at a
    /// time, and times each to each child's report of it; then leaves both alone and counts how
    /// often their threads wake up. Returns the contender's samples, the floor's, and the wake-ups
    /// per second of each.
    private func pairedLatencyAndIdle(_ contender: Contender, round: Int) throws(BenchError)
        -> ([Double], [Double], Double, Double)
    {
        let c = configuration
        let directory = "\(scratch)/latency-\(contender)-\(round)"
        try Files.makeDirectory(directory)
        defer { Files.remove(directory) }
        // Who starts first alternates with the round, as elsewhere.
        let starters: [Contender] = round % 2 == 0 ? [.floor, contender] : [contender, .floor]
        var processes: [Contender: ChildProcess] = [:]
        for starter in starters {
            let process = try child(["\(starter)-watch", directory, "report"], reports: true)
            _ = try process.expectLine(containing: "ready")
            processes[starter] = process
        }
        guard let watcher = processes[contender], let floor = processes[.floor] else { throw BenchError("no child") }
        var samples: [Double] = []
        var floorSamples: [Double] = []
        samples.reserveCapacity(c.latencyOperations)
        floorSamples.reserveCapacity(c.latencyOperations)
        for index in 0..<(c.latencyWarmUp + c.latencyOperations) {
            let start = monotonicNanoseconds()
            try Files.createFile("\(directory)/\(index)")
            let arrival = try watcher.readReport()
            let floorArrival = try floor.readReport()
            guard index >= c.latencyWarmUp else { continue }
            samples.append(Double(Int64(bitPattern: arrival &- start)))
            floorSamples.append(Double(Int64(bitPattern: floorArrival &- start)))
        }
        sleep(seconds: c.idleSettle)
        let before = (ContextSwitches(pid: watcher.pid), ContextSwitches(pid: floor.pid))
        sleep(seconds: c.idleWindow)
        let wakeUps = ContextSwitches(pid: watcher.pid).wakeUps(since: before.0)
        let floorWakeUps = ContextSwitches(pid: floor.pid).wakeUps(since: before.1)
        for process in [watcher, floor] {
            process.closeControl()
            // Drain the report pipe so the child never blocks writing to it while it finishes.
            while (try? process.readReport()) != nil {}
            _ = try process.expectLine(containing: "done")
            _ = try process.wait()
        }
        return (samples, floorSamples, Double(wakeUps) / c.idleWindow, Double(floorWakeUps) / c.idleWindow)
    }

    /// A settled library watcher and a floor watching for closes after writing, on one directory
    /// at the same time: files are written and closed one at a time, each timed from just before
    /// its close to each child's report of it. Returns the library's samples minus its quiet
    /// period (what settling adds beyond the period it promises), and the floor's.
    private func settledLatency(round: Int, comparingContent: Bool = false) throws(BenchError) -> ([Double], [Double]) {
        let c = configuration
        let directory = "\(scratch)/settled-\(comparingContent ? "content-" : "")\(round)"
        try Files.makeDirectory(directory)
        defer { Files.remove(directory) }
        let mode = comparingContent ? "library-settled-content" : "library-settled"
        let library = try child([mode, directory, "\(c.settledQuietMilliseconds)"], reports: true)
        _ = try library.expectLine(containing: "ready")
        let floor = try child(["floor-closes", directory], reports: true)
        _ = try floor.expectLine(containing: "ready")
        let quiet = Double(c.settledQuietMilliseconds) * 1e6
        var samples: [Double] = []
        var floorSamples: [Double] = []
        let chunk = [UInt8](repeating: 0x5A, count: 4096)
        for index in 0..<(c.settledOperations + 5) {
            let fd = open("\(directory)/\(index)", O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0, write(fd, chunk, chunk.count) == chunk.count else {
                throw .system("write", "\(directory)/\(index)")
            }
            let start = monotonicNanoseconds()
            close(fd)
            let floorArrival = try floor.readReport()
            let arrival = try library.readReport()
            guard index >= 5 else { continue }
            samples.append(Double(Int64(bitPattern: arrival &- start)) - quiet)
            floorSamples.append(Double(Int64(bitPattern: floorArrival &- start)))
        }
        for process in [library, floor] {
            process.closeControl()
            while (try? process.readReport()) != nil {}
            _ = try process.expectLine(containing: "done")
            _ = try process.wait()
        }
        return (samples, floorSamples)
    }

    struct BurstResult {
        let cpuPerChange: Double
        let created: Int
        let changes: Int
        let overflows: Int
        let residentKiB: Int
    }

    /// Creates files as fast as one thread can while the child watches, then stops the child and
    /// charges it the CPU time it spent after it said it was ready. The library watches on
    /// inotify, named so: what `.automatic` picks may change, the row's meaning must not.
    private func burst(_ contender: Contender, round: Int) throws(BenchError) -> BurstResult {
        let backend = contender == .library || contender == .libraryQueue ? ["inotify"] : []
        let directory = "\(scratch)/burst-\(contender)-\(round)"
        guard let result = try burst(in: directory, arguments: ["\(contender)-watch", directory, "quiet"] + backend)
        else { throw BenchError("child \(contender)-watch said fanotify is unavailable, watching on inotify") }
        return result
    }

    /// The same burst under a recursive library watcher on fanotify, in the same scratch
    /// directory (so on the same file system: its one mark covers all of it, and the rest of the
    /// machine's changes to that file system are read and dropped as well). Nil when this process
    /// cannot use fanotify.
    /// `floor`: the bare fanotify reader's child instead (`floor-watch … fanotify`), one mark as
    /// the library makes it.
    private func fanotifyBurst(round: Int, floor: Bool = false) throws(BenchError) -> BurstResult? {
        let directory = "\(scratch)/burst-fanotify-\(floor ? "floor-" : "")\(round)"
        let mode = floor ? "floor-watch" : "library-watch"
        return try burst(in: directory, arguments: [mode, directory, "quiet", "fanotify"])
    }

    /// The same burst made beside a recursive library watcher on fanotify whose tree stays
    /// quiet, in the same scratch directory: the mark sees every event and drops it. Charged per
    /// event made.
    private func fanotifyOutsideBurst(round: Int) throws(BenchError) -> BurstResult? {
        let tree = "\(scratch)/quiet-fanotify-\(round)"
        let outside = "\(scratch)/outside-fanotify-\(round)"
        try Files.makeDirectory(tree)
        defer { Files.remove(tree) }
        return try burst(in: outside, arguments: ["library-watch", tree, "quiet", "fanotify"])
    }

    private func burst(in directory: String, arguments: [String]) throws(BenchError) -> BurstResult? {
        let c = configuration
        try Files.makeDirectory(directory)
        defer { Files.remove(directory) }
        let process = try child(arguments)
        guard let ready = try expectLine(process, containing: "ready") else { return nil }
        try Files.createFiles(in: directory, prefix: "f", count: c.burstSize)
        process.closeControl()
        let done = try process.expectLine(containing: "done")
        let usage = try process.wait()
        let cpu = Double(cpuNanoseconds(usage)) - (try value("cpu", in: ready))
        return BurstResult(
            cpuPerChange: cpu / Double(c.burstSize), created: Int(try value("created", in: done)),
            changes: Int(try value("changes", in: done)), overflows: Int(try value("overflows", in: done)),
            residentKiB: Int(try value("resident", in: done)))
    }

    /// The child's first line containing `marker`; nil, once the child has exited, when it said
    /// instead that it cannot watch on fanotify (`unavailable REASON`), the reason kept for the
    /// fanotify rows.
    private func expectLine(_ process: ChildProcess, containing marker: String) throws(BenchError) -> String? {
        while let line = process.readLine() {
            if line.hasPrefix("unavailable ") {
                let reason = String(line.dropFirst("unavailable ".count))
                log("\(process.name): fanotify cannot be used here: \(reason); its rows will say so")
                fanotifyUnavailable = reason
                _ = try process.wait()
                return nil
            }
            if line.contains(marker) { return line }
        }
        throw BenchError("\(process.name) exited before printing \"\(marker)\"")
    }

    private func many(_ contender: Contender, parent: String) throws(BenchError) -> [String: Double] {
        let process = try child(["\(contender)-many", parent, String(configuration.watcherCount)])
        let line = try process.expectLine(containing: "many")
        _ = try process.wait()
        var result: [String: Double] = [:]
        for key in ["threads", "descriptors", "inotify", "heap"] { result[key] = try value(key, in: line) }
        result["residentKiB"] = try value("resident", in: line) / 1024
        return result
    }

    /// The most threads the child had beyond its start, while its slow delegates ran.
    private func slow(_ contender: Contender, parent: String) throws(BenchError) -> Double {
        let process = try child(["\(contender)-slow", parent, String(configuration.slowWatcherCount)])
        let line = try process.expectLine(containing: "slow")
        _ = try process.wait()
        return try value("threads", in: line)
    }

    struct TreeResult {
        let nanoseconds: Double
        let heapPerDirectory: Double
        /// inotify watches the recursive watcher added to the process's.
        let watches: Double
    }

    /// How long the library took to watch the tree (recursively, on inotify or on fanotify), the
    /// heap it added per directory, and the inotify watches it added. Nil when this process
    /// cannot use fanotify.
    private func libraryTree(root: String, directories: Int, fanotify: Bool) throws(BenchError) -> TreeResult? {
        let process = try child([fanotify ? "library-tree-fanotify" : "library-tree", root])
        guard let line = try expectLine(process, containing: "tree") else { return nil }
        _ = try process.wait()
        guard Int(try value("directories", in: line)) == directories else {
            throw BenchError(
                "\(process.name) watched \(try value("directories", in: line)) of \(directories) directories")
        }
        return TreeResult(
            nanoseconds: try value("ns", in: line),
            heapPerDirectory: try value("heap", in: line) / Double(directories + 1),
            watches: try value("watches", in: line))
    }

    /// Nanoseconds the floor took to watch the tree, and its watches (a directory each).
    private func floorTree(root: String) throws(BenchError) -> (nanoseconds: Double, watches: Double) {
        let process = try child(["floor-tree", root])
        let line = try process.expectLine(containing: "tree")
        _ = try process.wait()
        return (try value("ns", in: line), try value("directories", in: line))
    }

    /// Heap bytes per entry and milliseconds of the floor's snapshot of a directory (in this
    /// process: a snapshot is plain data, no watcher involved), and the same for the library's
    /// kept snapshot (in a child: a watcher that recovers exactly beside one that does not).
    private func snapshots() throws(BenchError) -> ([Double], [Double], [Double], [Double], [Double], [Double]) {
        let directory = "\(scratch)/snapshot"
        try Files.makeDirectory(directory)
        defer { Files.remove(directory) }
        try Files.createFiles(in: directory, prefix: "entry-", count: configuration.snapshotEntries)
        var perEntry: [Double] = []
        var listing: [Double] = []
        var libraryPerEntry: [Double] = []
        var libraryListing: [Double] = []
        var stateStart: [Double] = []
        var stateBytes: [Double] = []
        for round in 0..<configuration.rounds {
            log(
                "round \(round + 1)/\(configuration.rounds): snapshots of \(format(Double(configuration.snapshotEntries)))"
            )
            let before = cbs_heap_bytes_in_use()
            let start = monotonicNanoseconds()
            guard let snapshot = cif_snapshot_take(directory) else { throw .system("floor: snapshot", directory) }
            listing.append(Double(monotonicNanoseconds() - start) / 1e6)
            let bytes = cbs_heap_bytes_in_use() - before
            perEntry.append(Double(bytes) / Double(cif_snapshot_count(snapshot)))
            cif_snapshot_free(snapshot)
            let process = try child(["library-snapshot", directory])
            let line = try process.expectLine(containing: "snapshot")
            _ = try process.wait()
            let entries = try value("entries", in: line)
            libraryPerEntry.append(try value("heap", in: line) / entries)
            libraryListing.append(try value("ns", in: line) / 1e6)
            let stateFile = "\(scratch)/snapshot.state"
            let restart = try child(["library-state", directory, stateFile])
            let stateLine = try restart.expectLine(containing: "state")
            _ = try restart.wait()
            Files.remove(stateFile)
            Files.remove(stateFile + ".journal")
            stateStart.append(try value("ns", in: stateLine) / 1e6)
            stateBytes.append(try value("bytes", in: stateLine) / entries)
        }
        return (perEntry, listing, libraryPerEntry, libraryListing, stateStart, stateBytes)
    }

    /// What polling costs: the library's CPU time per poll of the snapshot directory's entries,
    /// against the floor's listing of the same directory (the least a poll can do), both per
    /// 10,000 entries; and how often a watcher polling every 100 ms wakes up while nothing
    /// changes (one wake-up per poll, at most).
    private func polling() throws(BenchError) -> ([Double], [Double], [Double]) {
        let c = configuration
        let directory = "\(scratch)/polled"
        try Files.makeDirectory(directory)
        defer { Files.remove(directory) }
        try Files.createFiles(in: directory, prefix: "entry-", count: c.snapshotEntries)
        let per10k = 10_000 / Double(c.snapshotEntries)
        let polls = c.quick ? 3 : 10
        var library: [Double] = []
        var floor: [Double] = []
        var wakeUps: [Double] = []
        let empty = "\(scratch)/polled-idle"
        try Files.makeDirectory(empty)
        defer { Files.remove(empty) }
        for round in 0..<c.rounds {
            log("round \(round + 1)/\(c.rounds): polling \(format(Double(c.snapshotEntries))) entries")
            let process = try child(["library-poll", directory, String(polls)])
            let line = try process.expectLine(containing: "poll")
            _ = try process.wait()
            library.append(try value("cpu", in: line) / 1e6 * per10k)
            let start = ownCPUNanoseconds()
            for _ in 0..<polls {
                guard let snapshot = cif_snapshot_take(directory) else { throw .system("floor: snapshot", directory) }
                cif_snapshot_free(snapshot)
            }
            floor.append(Double(ownCPUNanoseconds() - start) / Double(polls) / 1e6 * per10k)
            log("round \(round + 1)/\(c.rounds): a watcher polling every 100 ms, left alone")
            let idle = try child(["library-poll-idle", empty, "100"])
            _ = try idle.expectLine(containing: "ready")
            sleep(seconds: c.idleSettle)
            let before = ContextSwitches(pid: idle.pid)
            sleep(seconds: c.idleWindow)
            wakeUps.append(Double(ContextSwitches(pid: idle.pid).wakeUps(since: before)) / c.idleWindow)
            idle.closeControl()
            _ = try idle.expectLine(containing: "done")
            _ = try idle.wait()
        }
        return (library, floor, wakeUps)
    }

    /// The number after `key=` in a child's line.
    func value(_ key: String, in line: String) throws(BenchError) -> Double {
        for field in line.split(separator: " ") where field.hasPrefix(key + "=") {
            if let number = Double(field.dropFirst(key.count + 1)) { return number }
        }
        throw BenchError("no \(key)= in \"\(line)\"")
    }
}
