struct Peers {
    let bench: Bench
    func run() throws(BenchError) -> ([String], [String]) { ([], []) }
}
