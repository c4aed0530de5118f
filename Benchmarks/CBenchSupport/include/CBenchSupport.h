#ifndef C_BENCH_SUPPORT_H
#define C_BENCH_SUPPORT_H

#include <stddef.h>

/// Bytes the process has allocated with malloc and not freed (mallinfo2's uordblks), which the
/// Glibc module does not export. Exact to the byte, unlike resident memory, which moves by pages.
size_t cbs_heap_bytes_in_use(void);

#endif
