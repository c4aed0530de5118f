import Glibc

// dirwatch-bench: the library against the floor (a raw C inotify + epoll reader), and optionally
// against other watchers. See Benchmarks/README.md.
//
//   swift run -c release dirwatch-bench            full run; writes Docs/benchmarks.md and .svg
//   swift run -c release dirwatch-bench --quick    CI smoke run, under a minute; writes nothing
//   … --peers                                      also time inotifywait, watchfiles, watchdog, fsnotify
//   … --rounds N --output DIR --scratch DIR --burst N

let usage = """
    usage: dirwatch-bench [--quick] [--peers] [--rounds N] [--output DIR | --no-output] [--scratch DIR]
                          [--burst N] [--static-dirwatch PATH]
    """

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "--child" {
    Child.run(Array(arguments.dropFirst()))
}

var configuration = arguments.contains("--quick") ? Configuration.quick : Configuration()
var index = 0
while index < arguments.count {
    let argument = arguments[index]
    let operand = index + 1 < arguments.count ? arguments[index + 1] : nil
    switch (argument, operand) {
    case ("--quick", _): index += 1
    case ("--peers", _):
        configuration.peers = true
        index += 1
    case ("--no-output", _):
        configuration.outputDirectory = nil
        index += 1
    case ("--rounds", let value?) where Int(value).map({ $0 > 0 }) == true:
        configuration.rounds = Int(value)!
        index += 2
    case ("--output", let value?):
        configuration.outputDirectory = value
        index += 2
    case ("--scratch", let value?):
        configuration.scratchParent = value
        index += 2
    case ("--burst", let value?) where Int(value).map({ $0 > 0 }) == true:
        configuration.burstSize = Int(value)!
        index += 2
    case ("--static-dirwatch", let value?):
        configuration.staticDirwatch = value
        index += 2
    default:
        writeAll("dirwatch-bench: unexpected argument \"\(argument)\"\n\(usage)\n", to: 2)
        exit(2)
    }
}

// A child that never answers would hang the run (and CI) on a blocking read: past this the
// kernel ends the benchmark with SIGALRM, and its children see end of input and stop too.
alarm(configuration.quick ? 300 : 3600)

let machine = Machine.summary()
do throws(BenchError) {
    let bench = try Bench(configuration: configuration)
    try bench.run()
    var peerNames: [String] = []
    var peerNotes: [String] = []
    if configuration.peers {
        (peerNames, peerNotes) = try Peers(bench: bench).run()
    }
    let report = Report(
        figures: bench.figures, configuration: configuration, peerNames: peerNames, peerNotes: peerNotes,
        handoff: bench.handoff, machine: machine)
    let markdown = report.markdown()
    print(markdown)
    if let directory = configuration.outputDirectory {
        try Files.write(markdown, to: "\(directory)/benchmarks.md")
        try Files.write(report.svg(), to: "\(directory)/benchmarks.svg")
        writeAll("wrote \(directory)/benchmarks.md and \(directory)/benchmarks.svg\n", to: 2)
    }
} catch {
    writeAll("dirwatch-bench: \(error)\n", to: 2)
    exit(1)
}
