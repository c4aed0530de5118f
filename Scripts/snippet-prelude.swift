// What the documentation's snippets take as given: an app's own functions and values. Compiled
// by Scripts/check-snippets as a module of its own that the snippets import, so that a name a
// snippet declares itself hides the one here; never run. Only names a snippet uses belong here.
import DirectoryWatcher
import Dispatch
import Foundation

// An app's own work.
public func process(_ path: FileSystemPath) {}
public func reloadFileList() {}
public func indexChange(_ change: DirectoryChange) {}
public func reloadConfiguration() {}
public func add(_ path: FileSystemPath) {}
public func remove(_ path: FileSystemPath) {}
public func rename(_ path: FileSystemPath, to newPath: FileSystemPath) {}
public func swap(_ path: FileSystemPath, _ other: FileSystemPath) {}
public func refresh(_ path: FileSystemPath) {}
public func relistEverything() {}
public func showFolderGone() {}
public func report(_ error: DirectoryWatcherError) {}

// Values a snippet has at hand.
public let documents = "/srv/documents"
public let path = "/srv/uploads"
public let data = Data()
public let url = URL(fileURLWithPath: "/srv/uploads/report.pdf")
public let watcher: DirectoryWatcher = compiledNotRun()
public let change: DirectoryChange = compiledNotRun()

public func compiledNotRun<Value>() -> Value {
    fatalError("the documentation's snippets are compiled, not run")
}

/// `self` of a snippet marked `delegate`: an app's object that is a watcher's delegate.
open class SnippetDelegate: DirectoryWatcherDelegate, @unchecked Sendable {
    public var watcher: DirectoryWatcher?
    public var docWatcher: DirectoryWatcher?

    public init() {}
    open func directoryDidChange(_ watcher: DirectoryWatcher) {}
    public func reloadFiles() {}
}

/// `self` of a snippet marked `mainactor`: an app's object on the main actor (UI code).
@MainActor open class SnippetMainActorObject {
    public var watcher: DirectoryWatcher?

    public init() {}
    public func reloadFiles() {}
}

/// Stand-ins for the code the porting guide ports from: XestiMonitors and UIKit, in a namespace
/// of their own so that their `Monitor` does not hide the library's.
public enum XestiMonitors {
    public protocol Monitor: AnyObject {
        func startMonitoring()
        func stopMonitoring()
    }

    public final class SomeMonitor: Monitor {
        public init() {}
        public func startMonitoring() {}
        public func stopMonitoring() {}
    }

    open class UIViewController {
        public init() {}
        open func viewWillAppear(_ animated: Bool) {}
        open func viewWillDisappear(_ animated: Bool) {}
    }

    /// `self` of a snippet marked `xestimonitors`.
    open class ViewController: UIViewController {
        public let keyboardMonitor = SomeMonitor()
        public let memoryMonitor = SomeMonitor()
        public let orientationMonitor = SomeMonitor()
    }
}

/// The testing article's app type: the example package's document list
/// (Examples/DocumentListPackage), as far as the snippets use it.
public final class DocumentList: DirectoryWatcherDelegate, @unchecked Sendable {
    public typealias Watch = (_ path: String, _ delegate: any DirectoryWatcherDelegate) throws -> DirectoryWatcher
    public private(set) var folderWatcher: DirectoryWatcher?
    public var names: [String] { [] }

    public init(
        folder: String, names: [String] = [],
        watch: Watch = { path, delegate in try DirectoryWatcher.watchFolder(path: path, delegate: delegate) }
    ) throws {
        folderWatcher = try watch(folder, self)
    }
}
