/// What the benchmark found for one contender on one figure: a value per round, or why none.
enum Measured {
    case values([Double])
    case notAvailable(String)

    var values: [Double]? {
        if case .values(let values) = self, !values.isEmpty { return values }
        return nil
    }
}

/// What a figure should be for the library.
enum Goal {
    /// The median of the per-round ratios library / floor is at most this.
    case ratioAtMost(Double)
    /// The library's median is at most this (a count: lost changes, wake-ups, threads).
    case atMost(Double)
    /// Reported, no target.
    case none
}

/// One row of the table: the library and the floor (and peers, when measured) on one figure.
struct Figure {
    /// A short name the peers mode finds the row by.
    let key: String
    let name: String
    let unit: String
    var library: Measured
    var floor: Measured
    let goal: Goal
    /// The peers' values by peer name, when `--peers` ran.
    var peers: [String: Measured] = [:]

    /// Per-round ratios library / floor: the two were measured back to back in each round, so a
    /// ratio compares like with like even when the machine's speed drifts between rounds.
    var ratios: [Double]? {
        guard let library = library.values, let floor = floor.values, library.count == floor.count else { return nil }
        let pairs = zip(library, floor).filter { $0.1 > 0 }
        guard pairs.count == library.count else { return nil }
        return pairs.map { $0.0 / $0.1 }
    }

    /// Whether the goal is met: nil when there is no goal or nothing to judge yet.
    var goalMet: Bool? {
        switch goal {
        case .ratioAtMost(let limit):
            guard let ratios else { return nil }
            return Statistics(ratios).median <= limit
        case .atMost(let limit):
            guard let values = library.values else { return nil }
            return Statistics(values).median <= limit
        case .none:
            return nil
        }
    }

    /// The goal is a count for the library alone (a ratio to the floor's zero would say nothing).
    var isAbsoluteGoal: Bool {
        if case .atMost = goal { return true }
        return false
    }

    var goalText: String {
        switch goal {
        case .ratioAtMost(let limit): "≤ \(format(limit))x"
        case .atMost(let limit): "≤ \(format(limit))"
        case .none: ""
        }
    }
}

/// Min, median and max of a set of values.
struct Statistics {
    let min: Double
    let median: Double
    let max: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        min = sorted.first ?? 0
        max = sorted.last ?? 0
        let middle = sorted.count / 2
        median = sorted.isEmpty ? 0 : sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}

/// The value at fraction `quantile` of `values` (nearest rank).
func percentile(_ values: [Double], _ quantile: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    let rank = Int((quantile * Double(sorted.count)).rounded(.up)) - 1
    return sorted[Swift.max(0, Swift.min(sorted.count - 1, rank))]
}

/// Three significant digits, thousands separated, no exponent: 0.0123, 1.23, 123, 12,300.
func format(_ value: Double) -> String {
    if value == 0 { return "0" }
    if value == value.rounded() && abs(value) < 1e15 { return grouped(Int(value)) }
    let magnitude = abs(value)
    let decimals = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : magnitude >= 0.1 ? 3 : 4
    if decimals == 0 { return grouped(Int(value.rounded())) }
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let scaled = Int((magnitude * scale).rounded())
    var fraction = String(scaled % Int(scale))
    while fraction.count < decimals { fraction = "0" + fraction }
    return (value < 0 ? "-" : "") + grouped(scaled / Int(scale)) + "." + fraction
}

private func grouped(_ value: Int) -> String {
    let digits = String(abs(value))
    var result = ""
    for (index, digit) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { result.append(",") }
        result.append(digit)
    }
    return (value < 0 ? "-" : "") + result
}
