import XCTest

@_spi(DirectoryWatcherTesting) @testable import DirectoryWatcher

/// ``DirectoryWatcher/Options/excludes`` as a pure rule; ``TreeTests`` checks what it saves.
final class ExclusionsTests: XCTestCase {
    func testExcludeMatchesNameOrRelativePath() {
        let filter = Exclusions(["*.tmp", ".git", "build/*"])!
        let root: FileSystemPath = "/w"
        XCTAssertTrue(filter.excludes("/w/a.tmp", under: root))
        XCTAssertTrue(filter.excludes("/w/.git", under: root))
        XCTAssertTrue(filter.excludes("/w/build/out.o", under: root))
        XCTAssertFalse(filter.excludes("/w/a.txt", under: root))
        XCTAssertFalse(filter.excludes("/w/builder", under: root))
        let rename = DirectoryChange(kind: .renamed, path: "/w/doc.txt", oldPath: "/w/doc.tmp", isDirectory: false)
        XCTAssertFalse(filter.excludes(rename, under: root), "a save through a temporary file still shows")
        let overflow = DirectoryChange(kind: .overflow, path: "/w", isDirectory: true)
        XCTAssertFalse(Exclusions(["*"])!.excludes(overflow, under: root), "never hide lost changes")
    }

    func testTheRootIsNeverExcludedAndNoPatternsIsNoRule() {
        XCTAssertFalse(Exclusions(["*"])!.excludes("/w", under: "/w"))
        XCTAssertNil(Exclusions([]))
    }
}
