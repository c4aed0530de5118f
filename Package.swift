// swift-tools-version:6.0
// For Linux only: the library is built on inotify and epoll. On any other system its build stops
// at once with one error saying so (in CDirectoryWatcherShims and Support/LinuxOnly.swift).
import PackageDescription

let package = Package(
    name: "DirectoryWatcher",
    products: [
        .library(name: "DirectoryWatcher", targets: ["DirectoryWatcher"]),
        // For the tests of apps that use the watcher: on-disk fixtures and a simulated kernel.
        .library(name: "DirectoryWatcherTesting", targets: ["DirectoryWatcherTesting"]),
        .executable(name: "dirwatch", targets: ["dirwatch"]),
        .executable(name: "document-list", targets: ["document-list"]),
        .executable(name: "wait-for", targets: ["wait-for"]),
        .executable(name: "monitor-group", targets: ["monitor-group"]),
        .executable(name: "folder-notifications", targets: ["folder-notifications"]),
        .executable(name: "dirwatch-bench", targets: ["dirwatch-bench"]),
        .executable(name: "dirwatch-docs", targets: ["dirwatch-docs"]),
    ],
    targets: [
        // epoll and eventfd are not in the Glibc module; this header brings them in.
        .target(name: "CDirectoryWatcherShims"),
        .target(
            name: "DirectoryWatcher",
            dependencies: ["CDirectoryWatcherShims"]
        ),
        .target(
            name: "DirectoryWatcherTesting",
            dependencies: ["DirectoryWatcher", "CDirectoryWatcherShims"]
        ),
        // The dirwatch command: its logic in a library so the tests can reach it.
        .target(
            name: "DirWatchCLI",
            dependencies: ["DirectoryWatcher", "CDirectoryWatcherShims"]
        ),
        .executableTarget(
            name: "dirwatch",
            dependencies: ["DirWatchCLI"]
        ),
        .executableTarget(
            name: "document-list",
            dependencies: ["DirectoryWatcher"],
            path: "Examples/document-list"
        ),
        .executableTarget(
            name: "wait-for",
            dependencies: ["DirectoryWatcher"],
            path: "Examples/wait-for"
        ),
        .executableTarget(
            name: "monitor-group",
            dependencies: ["DirectoryWatcher"],
            path: "Examples/monitor-group"
        ),
        .executableTarget(
            name: "folder-notifications",
            dependencies: ["DirectoryWatcher"],
            path: "Examples/folder-notifications"
        ),
        // The benchmark's floor: a raw inotify + epoll reader in C, measured beside the library.
        .target(name: "CInotifyFloor", path: "Benchmarks/CInotifyFloor"),
        // What the benchmark reads about its own process that the Glibc module does not export.
        .target(name: "CBenchSupport", path: "Benchmarks/CBenchSupport"),
        .executableTarget(
            name: "dirwatch-bench",
            dependencies: ["DirectoryWatcher", "CInotifyFloor", "CBenchSupport"],
            path: "Benchmarks/dirwatch-bench"
        ),
        // Writes Docs/man/dirwatch.1 from the manual, Docs/DirectoryWatcher.docc/Dirwatch.md.
        .executableTarget(
            name: "dirwatch-docs",
            dependencies: ["DirWatchCLI"]
        ),
        .testTarget(
            name: "DirectoryWatcherTests",
            dependencies: ["DirectoryWatcher", "DirectoryWatcherTesting"],
            exclude: ["Conformance/MAPPING.md"]
        ),
        .testTarget(
            name: "DirectoryWatcherTestingTests",
            dependencies: ["DirectoryWatcherTesting", "DirectoryWatcher"]
        ),
        .testTarget(
            name: "DirWatchCLITests",
            dependencies: ["DirWatchCLI", "DirectoryWatcher"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
