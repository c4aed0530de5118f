import CDirectoryWatcherShims
import Glibc

/// A loop thread's life: it leads, stands by, or finishes a callback it was deposed in (see
/// ``Leadership`` for the hand-off and ``LoopThreads`` for the bookkeeping).
extension EventLoop {
    private final class ThreadStart {
        let loop: EventLoop
        let role: LoopThreads.Role
        init(loop: EventLoop, role: LoopThreads.Role) {
            self.loop = loop
            self.role = role
        }
    }

    /// Starts a thread that keeps the loop alive until it exits; nil at the thread limit.
    func createThread(_ role: LoopThreads.Role, failure: inout Int32) -> pthread_t? {
        let start = Unmanaged.passRetained(ThreadStart(loop: self, role: role))
        var handle = pthread_t()
        let result = system.calls.pthreadCreate(&handle, start.toOpaque()) { argument in
            let start = Unmanaged<ThreadStart>.fromOpaque(argument!).takeRetainedValue()
            start.loop.threadMain(startingAs: start.role)
            return nil
        }
        guard result == 0 else {
            start.release()
            failure = result
            return nil
        }
        return handle
    }

    func startStandby() -> pthread_t? {
        var failure: Int32 = 0
        return createThread(.standby, failure: &failure)
    }

    private func threadMain(startingAs role: LoopThreads.Role) {
        CallbackContext.enterForThreadLifetime()
        cdw_set_thread_name(Self.threadName)
        var leads = role == .leading
        if leads { leadership.lead() }
        while true {
            if leads {
                if lead() { break }
                // Deposed in a callback, whose watcher's deliveries this thread has finished.
                threads.setRole(.deposed)
                guard threads.deposedLeaderIsFree() else { break }
                leads = false
            } else {
                guard stand() else { break }
                leads = true
            }
        }
        // pthread_join returns a moment before the kernel drops this thread from
        // /proc/self/task; renaming it first means a thread named `threadName` is a running one.
        cdw_set_thread_name(Self.exitingThreadName)
        threads.finish()
    }

    /// Stands by until it takes the lead (true) or the loop closes (false).
    private func stand() -> Bool {
        var watch = StallWatch(ticksBeforeParking: LoopThreads.ticksBeforeParking)
        while true {
            let phase = leadership.observe()
            switch watch.tick(phase: phase) {
            case .takeOver(let observed):
                if leadership.takeOver(from: observed) {
                    threads.standbyLeads()
                    return true
                }
            case .park:
                guard threads.park(stillQuiet: { leadership.observe() == phase }) else { return false }
                watch.reset()
                continue
            case .wait:
                break
            }
            guard threads.tick() else { return false }
        }
    }
}
