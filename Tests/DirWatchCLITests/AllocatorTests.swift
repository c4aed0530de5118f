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
        // The threshold decides only when the heap must grow: a request its free space can serve
        // comes from there. So take blocks of 100 KB until the heap has to grow; with glibc's own
        // threshold (128 KB or more) none would be mapped. The bound leaves room for what the
        // test runner's other threads free meanwhile.
        let blockSize = 100 * 1024
        let most = (cdw_heap_free_bytes() + 16 * 1024 * 1024) / blockSize + 1
        var blocks: [UnsafeMutableRawPointer] = []
        blocks.reserveCapacity(most)
        defer { blocks.forEach { free($0) } }
        while blocks.count < most, blocks.last.map({ !cdw_block_is_mapped($0) }) ?? true {
            blocks.append(try #require(malloc(blockSize)))
        }
        #expect(
            blocks.last.map { cdw_block_is_mapped($0) } == true,
            "a block of 100 KB the heap had no room for has pages of its own")
    }
}
