#ifndef SIMP_ALLOCATION_COUNTER_H
#define SIMP_ALLOCATION_COUNTER_H

/// Heap allocations (malloc, calloc, realloc, aligned allocations) made by the calling thread
/// since it started. Only meaningful in an executable that links this target: it replaces
/// glibc's allocation functions with counting wrappers.
long simp_thread_allocations(void);

#endif
