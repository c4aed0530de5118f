import CDirectoryWatcherShims
import Glibc
import Testing

@testable import DirWatchCLI

/// dirwatch maps blocks of 64 KB and more on their own, so that a table's outgrown arrays go back
/// to the kernel rather than stay resident in the heap; a threshold the user gave glibc stands.
@Suite struct AllocatorTests {
    /// Under a sanitizer, whose allocator stands in for glibc's, malloc's settings and counts are
    /// not the allocator's.
    static let allocatorIsGlibcs =
        getenv("DIRWATCH_SANITIZED") == nil && dlsym(nil, "__asan_init") == nil && dlsym(nil, "__tsan_init") == nil

    @Test(.enabled(if: allocatorIsGlibcs, "a sanitizer's allocator stands in for glibc's"))
    func testLargeBlocksAreMappedOnTheirOwnUnlessTheUserSaidOtherwise() throws {
        // One test, in this order: the environment is the process's, and the threshold once set
        // stays set.
        setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=1048576", 1)
        #expect(!DirWatch.keepLargeBlocksApart(), "the user's threshold stands")
        unsetenv("GLIBC_TUNABLES")
        setenv("MALLOC_MMAP_THRESHOLD_", "1048576", 1)
        #expect(!DirWatch.keepLargeBlocksApart(), "the user's threshold stands")
        unsetenv("MALLOC_MMAP_THRESHOLD_")

        #expect(DirWatch.keepLargeBlocksApart())
        let before = cdw_mapped_blocks()
        let block = try #require(malloc(100 * 1024))
        defer { free(block) }
        #expect(cdw_mapped_blocks() == before + 1, "a block of 100 KB has pages of its own")
    }
}
