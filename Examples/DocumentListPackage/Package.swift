// swift-tools-version:6.0
// A package as an app's would be: the sample's document list, and its tests written with the
// test kit, on disk and simulated. Put it beside a checkout of DirectoryWatcher (as Getting
// Started does) and run `swift test`; inside the repository, `Scripts/test-example-package`
// does that for you.
import PackageDescription

let package = Package(
    name: "DocumentList",
    products: [
        .library(name: "DocumentList", targets: ["DocumentList"])
    ],
    dependencies: [
        .package(path: "../DirectoryWatcher")
    ],
    targets: [
        .target(
            name: "DocumentList",
            dependencies: [.product(name: "DirectoryWatcher", package: "DirectoryWatcher")]
        ),
        .testTarget(
            name: "DocumentListTests",
            dependencies: [
                "DocumentList",
                .product(name: "DirectoryWatcherTesting", package: "DirectoryWatcher"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
