import Dispatch
import Glibc
import Synchronization

/// A large level of a tree's walk, shared by the threads that watch and list it. Each thread
/// takes the next directory not yet taken (an atomic counter), walks it, writes its result at its
/// index and marks it ready; the loop's thread reads the results in order, and walks directories
/// itself while the one it needs next is not ready.
final class LevelWalk<Step, Result>: @unchecked Sendable {
    private let steps: [Step]
    private let one: (Step) -> Result
    private let results: UnsafeMutableBufferPointer<Result?>
    private let ready: UnsafeMutablePointer<Atomic<Bool>>
    private let taken = Atomic<Int>(0)

    init(_ steps: [Step], _ one: @escaping (Step) -> Result) {
        self.steps = steps
        self.one = one
        results = .allocate(capacity: steps.count)
        results.initialize(repeating: nil)
        ready = .allocate(capacity: steps.count)
        for index in steps.indices { (ready + index).initialize(to: Atomic(false)) }
    }

    deinit {
        results.deinitialize()
        results.deallocate()
        ready.deinitialize(count: steps.count)
        ready.deallocate()
    }

    /// Walks directories until none is left to take.
    func walkAll() {
        while walkNext() {}
    }

    /// Takes and walks the next directory; false when every one was taken.
    private func walkNext() -> Bool {
        let index = taken.wrappingAdd(1, ordering: .relaxed).oldValue
        guard index < steps.count else { return false }
        results[index] = one(steps[index])
        ready[index].store(true, ordering: .releasing)
        return true
    }

    /// The result at `index`, once ready; this thread walks others meanwhile.
    func result(_ index: Int) -> Result {
        while !ready[index].load(ordering: .acquiring) {
            if !walkNext() { sched_yield() }
        }
        let result = results[index]!
        results[index] = nil
        return result
    }
}
