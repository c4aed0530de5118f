// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "DirectoryWatcher",
    products: [
        .library(name: "DirectoryWatcher", targets: ["DirectoryWatcher"]),
        .executable(name: "dirwatch", targets: ["dirwatch"]),
        .executable(name: "document-list", targets: ["document-list"]),
    ],
    targets: [
        // epoll and eventfd are not in the Glibc module; this header brings them in.
        .target(name: "CDirectoryWatcherShims"),
        .target(
            name: "DirectoryWatcher",
            dependencies: ["CDirectoryWatcherShims"]
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
        .testTarget(
            name: "DirectoryWatcherTests",
            dependencies: ["DirectoryWatcher"]
        ),
        .testTarget(
            name: "DirWatchCLITests",
            dependencies: ["DirWatchCLI", "DirectoryWatcher"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
