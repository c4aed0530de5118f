import Glibc

/// The table (Markdown) and the chart (SVG), written from the figures with no dependencies.
struct Report {
    let figures: [Figure]
    let configuration: Configuration
    let peerNames: [String]
    let peerNotes: [String]
    /// The floor with a thread hand-off, by figure key (see `Contender.handoff`).
    let handoff: [String: [Double]]
    /// `Machine.summary()`, taken when the run started.
    let machine: String

    // MARK: - Markdown

    func markdown() -> String {
        var lines: [String] = []
        lines.append("# Benchmarks")
        lines.append("")
        lines.append(
            "Written by `swift run -c release dirwatch-bench\(configuration.quick ? " --quick" : "")"
                + "\(configuration.peers ? " --peers" : "")` on \(Machine.date()). \(machine).")
        lines.append("")
        lines.append(
            "Every figure is the library beside the floor, a raw C inotify + epoll reader, measured back to back "
                + "in the same run, each in its own child process; the ratio is library / floor per round, and "
                + "each cell gives the median with min–max over \(configuration.rounds) rounds. How and why: "
                + "[Benchmarks/README.md](../Benchmarks/README.md).")
        lines.append("")
        lines.append(contentsOf: table())
        lines.append("")
        let met = figures.filter { $0.goalMet == true }.map(\.name)
        let missed = figures.filter { $0.goalMet == false }.map(\.name)
        let open = figures.filter { if case .none = $0.goal { false } else { $0.goalMet == nil } }.map(\.name)
        lines.append("Goals met: \(met.isEmpty ? "none" : met.joined(separator: "; ")).")
        lines.append("")
        lines.append("Goals missed: \(missed.isEmpty ? "none" : missed.joined(separator: "; ")).")
        if !open.isEmpty {
            lines.append("")
            lines.append(
                "Goals not measurable in this run (the feature is not in the library, or this machine cannot use it): "
                    + "\(open.joined(separator: "; ")).")
        }
        lines.append("")
        lines.append("## Where the time goes")
        lines.append("")
        lines.append(
            "The floor again, with the library's shape: its reading thread hands each read to a second thread "
                + "(mutex and condition variable) that does the per-record work. Measured in the same rounds. "
                + "The gap from the floor to this is the cost of the hop between two threads; the gap from this "
                + "to the library is the cost of the library's own code.")
        lines.append("")
        lines.append(contentsOf: handoffTable())
        if configuration.peers {
            lines.append("")
            lines.append("## Peers")
            lines.append("")
            lines.append(
                "Other watchers run as processes under the same load, in the same run; ratios are to the floor's "
                    + "median. Their CPU excludes what the same peer spends starting and stopping with nothing to do. "
                    + "A change counts as lost when the peer has not reported it 3 s after its last report: a peer that "
                    + "falls behind in a burst loses what overflows the kernel queue (watchdog logs \"Inotify queue "
                    + "overflowed\").")
            lines.append("")
            lines.append(contentsOf: peerTable())
            for note in peerNotes {
                lines.append("")
                lines.append(note)
            }
        }
        lines.append("")
        lines.append("![Ratios to the floor](benchmarks.svg)")
        lines.append("")
        return lines.joined(separator: "\n")
    }

    private func table() -> [String] {
        var lines = [
            "| Figure | Unit | Library | Floor | Library / floor | Goal | Met |",
            "|---|---|---:|---:|---:|---|---|",
        ]
        for figure in figures {
            let ratio = figure.ratios.map(cell) ?? "–"
            let met = figure.goalMet.map { $0 ? "yes" : "**no**" } ?? (figure.goalText.isEmpty ? "" : "n/a")
            lines.append(
                "| \(figure.name) | \(figure.unit) | \(cell(figure.library)) | \(cell(figure.floor)) | \(ratio) "
                    + "| \(figure.goalText) | \(met) |")
        }
        return lines
    }

    private func handoffTable() -> [String] {
        var lines = [
            "| Figure | Unit | Floor | Floor + hand-off | Library | Library / floor + hand-off |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for figure in figures {
            guard let values = handoff[figure.key], !values.isEmpty, let floor = figure.floor.values,
                let library = figure.library.values
            else { continue }
            let ratio = zip(library, values).filter { $0.1 > 0 }.map { $0.0 / $0.1 }
            let floorMedian = Statistics(floor).median
            let handoffMedian = Statistics(values).median
            let share = floorMedian > 0 ? " (\(format(handoffMedian / floorMedian))x)" : ""
            lines.append(
                "| \(figure.name) | \(figure.unit) | \(cell(floor)) | \(cell(values))\(share) | \(cell(library)) "
                    + "| \(ratio.isEmpty ? "–" : cell(ratio)) |")
        }
        return lines
    }

    private func peerTable() -> [String] {
        let peerFigures = figures.filter { !$0.peers.isEmpty }
        var lines = [
            "| Figure | Unit | Floor | Library | " + peerNames.joined(separator: " | ") + " |",
            "|---|---|---:|---:|" + String(repeating: "---:|", count: peerNames.count),
        ]
        for figure in peerFigures {
            let floor = figure.floor.values.map { Statistics($0).median }
            func relative(_ measured: Measured) -> String {
                guard let values = measured.values else { return cell(measured) }
                let median = Statistics(values).median
                guard let floor, floor > 0 else { return format(median) }
                return "\(format(median)) (\(format(median / floor))x)"
            }
            let peers = peerNames.map { figure.peers[$0].map(relative) ?? "–" }
            lines.append(
                "| \(figure.name) | \(figure.unit) | \(relative(figure.floor)) | \(relative(figure.library)) | "
                    + peers.joined(separator: " | ") + " |")
        }
        return lines
    }

    private func cell(_ measured: Measured) -> String {
        switch measured {
        case .values(let values): cell(values)
        case .notAvailable(let reason): "n/a: \(reason)"
        }
    }

    private func cell(_ values: [Double]) -> String {
        guard !values.isEmpty else { return "–" }
        let statistics = Statistics(values)
        if statistics.min == statistics.max { return format(statistics.median) }
        return "\(format(statistics.median)) (\(format(statistics.min))–\(format(statistics.max)))"
    }

    // MARK: - SVG

    /// One row per figure: a bar for the median ratio on a logarithmic axis, a whisker from min to
    /// max, a tick at the goal; figures without a ratio say why in words.
    func svg() -> String {
        let rowHeight = 26.0
        let labelWidth = 330.0
        let plotWidth = 420.0
        let textWidth = 250.0
        let top = 56.0
        let width = labelWidth + plotWidth + textWidth + 20
        let height = top + rowHeight * Double(figures.count) + 40
        let ratios = figures.filter { !$0.isAbsoluteGoal }.compactMap(\.ratios).flatMap { $0 }
        let lowest = Swift.min(0.5, ratios.min() ?? 1)
        let highest = Swift.max(2, ratios.max() ?? 1)
        let low = pow(10, (log10(lowest)).rounded(.down))
        let high = pow(10, (log10(highest)).rounded(.up))
        func x(_ ratio: Double) -> Double {
            labelWidth + plotWidth * (log10(Swift.max(ratio, low)) - log10(low)) / (log10(high) - log10(low))
        }
        var out: [String] = []
        out.append(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
                + "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">")
        out.append("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>")
        out.append(
            "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">DirectoryWatcher / C inotify floor "
                + "(median, min–max over \(configuration.rounds) round\(configuration.rounds == 1 ? "" : "s"); "
                + "log scale; left is better; dashed: goal)</text>")
        out.append("<text x=\"10\" y=\"40\" fill=\"#555\">\(escape("\(Machine.date()). \(machine)"))</text>")
        // Decade grid lines, and a stronger line at 1x: the floor.
        var tick = low
        while tick <= high * 1.0001 {
            let position = x(tick)
            let isFloor = abs(tick - 1) < 1e-9
            out.append(
                "<line x1=\"\(position)\" y1=\"\(top - 6)\" x2=\"\(position)\" y2=\"\(height - 30)\" "
                    + "stroke=\"\(isFloor ? "#333" : "#ddd")\" stroke-width=\"\(isFloor ? 1.5 : 1)\"/>")
            out.append(
                "<text x=\"\(position)\" y=\"\(height - 14)\" text-anchor=\"middle\" fill=\"#555\">"
                    + "\(tick < 1 ? String(tick) : format(tick))x</text>")
            tick *= 10
        }
        for (index, figure) in figures.enumerated() {
            let y = top + rowHeight * Double(index)
            let middle = y + rowHeight / 2
            out.append("<text x=\"10\" y=\"\(middle + 4)\">\(escape(figure.name))</text>")
            let color = figure.goalMet == false ? "#d9534f" : figure.goalMet == true ? "#5cb85c" : "#7a9cc6"
            if let ratios = figure.ratios, !figure.isAbsoluteGoal {
                let statistics = Statistics(ratios)
                // From the floor (1x) to the median: right is worse, left is better.
                let start = Swift.min(x(1), x(statistics.median))
                out.append(
                    "<rect x=\"\(start)\" y=\"\(y + 6)\" width=\"\(Swift.max(1, abs(x(statistics.median) - x(1))))\" "
                        + "height=\"\(rowHeight - 12)\" fill=\"\(color)\"/>")
                out.append(
                    "<line x1=\"\(x(statistics.min))\" y1=\"\(middle)\" x2=\"\(x(statistics.max))\" y2=\"\(middle)\" "
                        + "stroke=\"#222\" stroke-width=\"1.5\"/>")
                if case .ratioAtMost(let limit) = figure.goal {
                    out.append(
                        "<line x1=\"\(x(limit))\" y1=\"\(y + 3)\" x2=\"\(x(limit))\" y2=\"\(y + rowHeight - 3)\" "
                            + "stroke=\"#000\" stroke-width=\"2\" stroke-dasharray=\"3,2\"/>")
                }
                out.append(
                    "<text x=\"\(labelWidth + plotWidth + 10)\" y=\"\(middle + 4)\">"
                        + "\(escape(format(statistics.median) + "x" + (figure.goalText.isEmpty ? "" : "  goal " + figure.goalText)))</text>"
                )
            } else {
                // A white outline keeps the words readable across the grid lines.
                out.append(
                    "<text x=\"\(labelWidth + 6)\" y=\"\(middle + 4)\" stroke=\"white\" stroke-width=\"4\" "
                        + "paint-order=\"stroke\" fill=\"\(figure.goalMet == false ? "#d9534f" : "#555")\">"
                        + "\(escape(summary(figure)))</text>")
            }
        }
        out.append("</svg>")
        return out.joined(separator: "\n") + "\n"
    }

    /// Words for a figure that has no ratio: a count against its goal, or why it is missing.
    private func summary(_ figure: Figure) -> String {
        var parts: [String] = []
        switch figure.library {
        case .values(let values): parts.append("library \(format(Statistics(values).median))")
        case .notAvailable(let reason): parts.append("library n/a: \(reason)")
        }
        if let floor = figure.floor.values { parts.append("floor \(format(Statistics(floor).median))") }
        if !figure.goalText.isEmpty {
            parts.append("goal \(figure.goalText)" + (figure.goalMet.map { $0 ? " met" : " missed" } ?? ""))
        }
        return parts.joined(separator: ", ")
    }

    private func escape(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            default: result.append(character)
            }
        }
        return result
    }
}

/// What the figures were measured on.
enum Machine {
    static func date() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)) UTC"
    }

    static func summary() -> String {
        let model =
            readText("/proc/cpuinfo")?.split(separator: "\n").first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }.map { String($0.drop { $0 == " " }) }
            ?? "unknown CPU"
        let cores = sysconf(Int32(_SC_NPROCESSORS_ONLN))
        var names = utsname()
        uname(&names)
        let kernel = withUnsafeBytes(of: names.release) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
        let queued = readText("/proc/sys/fs/inotify/max_queued_events")?.filter(\.isNumber) ?? "?"
        let fanotifyQueued = readText("/proc/sys/fs/fanotify/max_queued_events")?.filter(\.isNumber) ?? "?"
        // The load when the run started: other work on a shared machine moves the absolute figures.
        let load = readText("/proc/loadavg")?.split(separator: " ").first.map(String.init) ?? "?"
        return "\(model), \(cores) cores, Linux \(kernel), fs.inotify.max_queued_events \(queued), "
            + "fs.fanotify.max_queued_events \(fanotifyQueued), load average \(load)"
    }
}
