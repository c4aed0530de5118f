#include "CBenchSupport.h"

#include <malloc.h>

// Every arena's chunks in use, and the large blocks malloc took straight from mmap (a hash table
// of 100,000 entries is one of those).
size_t cbs_heap_bytes_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}
