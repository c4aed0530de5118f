// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "DirectoryWatcher",
    products: [
        .library(name: "DirectoryWatcher", targets: ["DirectoryWatcher"]),
        .executable(name: "document-list", targets: ["document-list"]),
    ],
    targets: [
        // epoll and eventfd are not in the Glibc module; this header brings them in.
        .target(name: "CDirectoryWatcherShims"),
        .target(
            name: "DirectoryWatcher",
            dependencies: ["CDirectoryWatcherShims"]
        ),
        .executableTarget(
            name: "document-list",
            dependencies: ["DirectoryWatcher"],
            path: "Examples/document-list"
        ),
        .testTarget(
            name: "DirectoryWatcherTests",
            dependencies: ["DirectoryWatcher"],
            exclude: ["Conformance/MAPPING.md"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
