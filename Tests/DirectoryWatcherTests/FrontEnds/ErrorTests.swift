import Foundation
import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// Every way `watchFolder` can fail: real failures where the kernel produces them for root too,
/// injected ones (through the syscall table) where it does not. Each error names the path.
final class ErrorTests: WatchedDirectoryTestCase {
    private func watchError(_ path: String, file: StaticString = #filePath, line: UInt = #line)
        -> DirectoryWatcherError?
    {
        do {
            let watcher = try DirectoryWatcher.watchFolder(path: path, delegate: Recorder())
            watcher.invalidate()
            XCTFail("watching \(path) should fail", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    func testEmptyPath() {
        let error = watchError("")
        XCTAssertEqual(error?.code, .emptyPath)
        XCTAssertEqual(error?.description, #"cannot watch "": the path is empty; pass a directory such as ".""#)
    }

    /// Before, a queue with `Delivery.eventLoopThread` stopped the process (a precondition);
    /// every other option that cannot be used throws.
    func testAQueueWithDeliveryOnTheLoopsThreadIsRefused() {
        let options = DirectoryWatcher.Options(delivery: .eventLoopThread)
        XCTAssertThrowsError(
            try DirectoryWatcher.watchFolder(
                path: directory.path, options: options, delegate: Recorder(), queue: .main)
        ) { error in
            let error = error as? DirectoryWatcherError
            XCTAssertEqual(error?.code, .invalidOption)
            XCTAssertEqual(error?.path, FileSystemPath(directory.path))
            XCTAssertTrue(
                error?.description.contains("Delivery.eventLoopThread") ?? false, "\(String(describing: error))")
        }
        XCTAssertThrowsError(try DirectoryWatcher(path: directory.path, options: options, queue: .main) { _ in })
    }

    /// The codes are values to compare with, named as their members are; a backend's refusal is
    /// said by the error itself, not by the name of a function that was never called.
    func testCodesAreNamedAndARefusalIsTheBackends() {
        XCTAssertEqual(DirectoryWatcherError.Code.permissionDenied.description, "permissionDenied")
        XCTAssertEqual(DirectoryWatcherError.Code.other(errno: EIO).description, "other(errno: \(EIO))")
        XCTAssertNotEqual(DirectoryWatcherError.Code.other(errno: EIO), .other(errno: EAGAIN))
        var refusal = SyscallError(function: "fanotify_mark", errno: EPERM)
        XCTAssertEqual(DirectoryWatcherError(refusal, path: "/d").code, .permissionDenied)
        refusal.refusesBackend = true
        refusal.detail = "fanotify needs CAP_SYS_ADMIN"
        let error = DirectoryWatcherError(refusal, path: "/d")
        XCTAssertEqual(error.code, .backendUnavailable)
        XCTAssertEqual(error.path, "/d")
        XCTAssertTrue(error.description.contains("CAP_SYS_ADMIN"), error.description)
    }

    func testMissingPath() {
        let missing = directory.url("not-here")
        let error = watchError(missing)
        XCTAssertEqual(error?.code, .noSuchPath)
        XCTAssertEqual(error?.path, FileSystemPath(missing))
        XCTAssertEqual(error?.errno, ENOENT)
        XCTAssertEqual(error?.description, "cannot watch \"\(missing)\": no such file or directory")
    }

    func testRegularFile() {
        let file = directory.touch("plain.txt")
        let error = watchError(file)
        XCTAssertEqual(error?.code, .notADirectory)
        XCTAssertTrue(error!.description.hasPrefix("cannot watch \"\(file)\": not a directory"))
    }

    func testComponentThatIsAFile() {
        let file = directory.touch("plain.txt")
        XCTAssertEqual(watchError(file + "/inside")?.code, .notADirectory)
    }

    func testNameTooLong() {
        let long = directory.url(String(repeating: "x", count: 300))
        let error = watchError(long)
        XCTAssertEqual(error?.code, .nameTooLong)
        XCTAssertTrue(error!.description.contains(long))
    }

    func testSymbolicLinkLoop() {
        let a = directory.url("a")
        let b = directory.url("b")
        symlink(b, a)
        symlink(a, b)
        XCTAssertEqual(watchError(a)?.code, .symbolicLinkLoop)
    }

    func testSymbolicLinkToADirectoryIsFollowed() throws {
        let target = directory.mkdir("target")
        let link = directory.url("link")
        symlink(target, link)
        try watch { try DirectoryWatcher.watchFolder(path: link, delegate: $0) }
        XCTAssertEqual(watcher.path, FileSystemPath(link), "the path stays as given")
        directory.touch("target/through-link")
        XCTAssertEqual(delivered(), [DirectoryChange(.created, link + "/through-link")])
    }

    func testPathWithControlCharactersStaysOnOneLine() {
        let error = watchError(directory.url("odd\nname\u{1B}[2J"))
        XCTAssertEqual(error?.code, .noSuchPath)
        XCTAssertFalse(error!.description.contains("\n"))
        XCTAssertFalse(error!.description.contains("\u{1B}"))
        XCTAssertTrue(error!.description.contains(#"odd\nname\u{1b}[2J"#))
    }

    // MARK: Injected through the syscall table

    /// Watches `directory` on a loop whose `inotify_add_watch` fails with `code` for user paths
    /// (the loop's own barrier watch still succeeds).
    private func injectedAddWatchError(_ code: Int32) throws -> DirectoryWatcherError? {
        let calls = SystemCalls.live.failing(\.inotifyAddWatch, errno: code) { _, path, _ in
            !String(cString: path).hasPrefix("/proc/self/fd/")
        }
        let loop = try EventLoop(system: System(calls))
        defer { loop.shutdown() }
        do {
            _ = try DirectoryWatcher.make(path: directory.path, delegate: Recorder(), queue: nil, loop: loop)
            XCTFail("the injected \(code) should surface")
            return nil
        } catch {
            XCTAssertEqual(error.path, FileSystemPath(directory.path))
            XCTAssertEqual(error.function, "inotify_add_watch")
            return error
        }
    }

    func testPermissionDenied() throws {
        let error = try injectedAddWatchError(EACCES)
        XCTAssertEqual(error?.code, .permissionDenied)
        XCTAssertEqual(
            error?.description,
            "cannot watch \"\(directory.path)\": permission denied; the directory must be readable and searchable")
    }

    func testWatchLimitSaysWatchLimitNotFullDisk() throws {
        let error = try injectedAddWatchError(ENOSPC)
        XCTAssertEqual(error?.code, .watchLimitReached)
        XCTAssertTrue(error!.description.contains("fs.inotify.max_user_watches"))
        XCTAssertTrue(error!.description.contains("not a full disk"))
    }

    func testOutOfMemory() throws {
        XCTAssertEqual(try injectedAddWatchError(ENOMEM)?.code, .outOfMemory)
    }

    func testUnknownErrnoIsNamed() throws {
        let error = try injectedAddWatchError(EIO)
        XCTAssertEqual(error?.code, .other(errno: EIO))
        XCTAssertTrue(error!.description.contains("inotify_add_watch failed"))
        XCTAssertTrue(error!.description.contains("EIO"))
    }

    func testInstanceLimitNamesTheSysctl() {
        XCTAssertThrowsError(try EventLoop(system: System(.live.failing(\.inotifyInit1, errno: EMFILE)))) { error in
            let watchError = DirectoryWatcherError(error as! SyscallError, path: "/srv/x")
            XCTAssertEqual(watchError.code, .instanceLimitReached)
            XCTAssertTrue(watchError.description.hasPrefix(#"cannot watch "/srv/x": the inotify instance limit"#))
            XCTAssertTrue(watchError.description.contains("fs.inotify.max_user_instances"))
        }
    }

    /// `EMFILE` from `inotify_init1` with no other descriptor to be had either: the process's
    /// limit, not the user's instances, and the message says how to raise it.
    func testDescriptorLimitAtInotifyInitNamesTheProcessLimit() {
        let calls = SystemCalls.live.failing(\.inotifyInit1, errno: EMFILE).failing(\.eventfd, errno: EMFILE)
        XCTAssertThrowsError(try EventLoop(system: System(calls))) { error in
            let failure = error as! SyscallError
            XCTAssertEqual(failure.function, "inotify_init1")
            XCTAssertTrue(failure.processOutOfDescriptors)
            let watchError = DirectoryWatcherError(failure, path: "/srv/x")
            XCTAssertEqual(watchError.code, .descriptorLimitReached)
            XCTAssertEqual(
                watchError.description,
                #"cannot watch "/srv/x": this process's limit on open descriptors is reached (RLIMIT_NOFILE, "#
                    + "`ulimit -n`); close some or raise the limit: `ulimit -n 65536` in the shell that starts "
                    + "the program, `LimitNOFILE=65536` in its systemd unit")
        }
    }

    /// The instance limit's probe opens a descriptor only to close it again.
    func testInstanceLimitProbeLeavesNoDescriptor() {
        let descriptors = ProcessResources.openDescriptors()
        XCTAssertThrowsError(try EventLoop(system: System(.live.failing(\.inotifyInit1, errno: EMFILE)))) { error in
            XCTAssertEqual((error as? SyscallError)?.processOutOfDescriptors, false)
        }
        XCTAssertEqual(ProcessResources.openDescriptors(), descriptors)
    }

    /// The real limit: RLIMIT_NOFILE lowered, for the moment the loop takes to start, to the
    /// lowest free descriptor number, so that the kernel refuses every new descriptor.
    func testDescriptorLimitReachedForRealIsTheProcessLimit() throws {
        var saved = rlimit()
        XCTAssertEqual(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &saved), 0)
        let lowest = open("/dev/null", O_RDONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(lowest, 0)
        close(lowest)
        var lowered = saved
        lowered.rlim_cur = rlim_t(lowest)
        XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &lowered), 0)
        let failure: SyscallError?
        do {
            try EventLoop().shutdown()
            failure = nil
        } catch {
            failure = error
        }
        XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &saved), 0)
        XCTAssertEqual(failure?.function, "inotify_init1")
        XCTAssertEqual(failure?.errno, EMFILE)
        XCTAssertEqual(failure.map { DirectoryWatcherError($0, path: "/srv/x").code }, .descriptorLimitReached)
    }

    func testSystemWideFileLimitNamesFileMax() {
        let error = DirectoryWatcherError(SyscallError(function: "epoll_create1", errno: ENFILE), path: "/x")
        XCTAssertEqual(error.code, .descriptorLimitReached)
        XCTAssertTrue(error.description.contains("fs.file-max"), error.description)
    }

    func testDescriptorLimitOutsideInotify() {
        XCTAssertThrowsError(try EventLoop(system: System(.live.failing(\.epollCreate1, errno: EMFILE)))) { error in
            XCTAssertEqual(DirectoryWatcherError(error as! SyscallError, path: "/x").code, .descriptorLimitReached)
        }
    }

    func testFailedLoopStartClosesWhatItOpened() {
        let closed = LockedValue<[Int32]>([])
        let opened = LockedValue<[Int32]>([])
        var calls = SystemCalls.live.failing(\.eventfd, errno: ENFILE)
        calls.inotifyInit1 = { flags in
            let fd = SystemCalls.live.inotifyInit1(flags)
            opened.update { $0.append(fd) }
            return fd
        }
        calls.close = { fd in
            closed.update { $0.append(fd) }
            return SystemCalls.live.close(fd)
        }
        let descriptors = ProcessResources.openDescriptors()
        XCTAssertThrowsError(try EventLoop(system: System(calls)))
        XCTAssertEqual(ProcessResources.openDescriptors(), descriptors)
        XCTAssertTrue(Set(opened.get()).isSubset(of: Set(closed.get())))
    }

    func testThreadLimitIsAnErrorNotACrash() {
        let descriptors = ProcessResources.openDescriptors()
        XCTAssertThrowsError(try EventLoop(system: System(.live.failing(\.pthreadCreate, errno: EAGAIN)))) { error in
            XCTAssertEqual(error as? SyscallError, SyscallError(function: "pthread_create", errno: EAGAIN))
            let watchError = DirectoryWatcherError(error as! SyscallError, path: "/srv")
            XCTAssertTrue(watchError.description.hasPrefix(#"cannot watch "/srv": pthread_create failed"#))
        }
        XCTAssertEqual(ProcessResources.openDescriptors(), descriptors, "everything opened was closed")
    }

    func testInterruptedCallsAreRetried() throws {
        let attempts = LockedValue(0)
        let calls = SystemCalls.live.failing(\.inotifyAddWatch, errno: EINTR, times: 3, counting: attempts)
        let loop = try EventLoop(system: System(calls))
        defer { loop.shutdown() }
        let recorder = Recorder()
        let watcher = try DirectoryWatcher.make(path: directory.path, delegate: recorder, queue: nil, loop: loop)
        defer { watcher.invalidate() }
        let file = directory.touch("works")
        waitForDelivery(watcher)
        XCTAssertEqual(recorder.changes, [DirectoryChange(.created, file)])
        XCTAssertEqual(
            attempts.get(), 5, "the barrier's watch interrupted 3 times, then it and the directory's succeeded")
    }

    func testFailingBarrierWriteStillCompletesBarriers() throws {
        let loop = try EventLoop(system: System(.live.failing(\.futimens, errno: EIO)))
        defer { loop.shutdown() }
        let watcher = try DirectoryWatcher.make(path: directory.path, delegate: Recorder(), queue: nil, loop: loop)
        defer { watcher.invalidate() }
        for _ in 0..<3 { waitForDelivery(watcher) }
    }

    func testCurrentDirectoryFailureNamesThePath() throws {
        let loop = try EventLoop(system: System(.live.failing(\.getcwd, errno: ENOENT)))
        defer { loop.shutdown() }
        XCTAssertThrowsError(try DirectoryWatcher.make(path: "relative", delegate: Recorder(), queue: nil, loop: loop))
        {
            error in
            XCTAssertEqual((error as? DirectoryWatcherError)?.code, .noSuchPath)
            XCTAssertEqual((error as? DirectoryWatcherError)?.function, "getcwd")
        }
    }
}
