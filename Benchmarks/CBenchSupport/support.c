#include "CBenchSupport.h"

#include <malloc.h>

size_t cbs_heap_bytes_in_use(void) { return mallinfo2().uordblks; }
