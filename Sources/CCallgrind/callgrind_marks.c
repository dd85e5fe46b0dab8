// callgrind's client requests as functions Swift can call (the requests are C macros). They
// are a few no-op instructions when the process does not run under valgrind. Without
// valgrind's headers at build time (Debian's valgrind package) they do nothing at all, and
// simp_callgrind_running says so.
#include "callgrind_marks.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define SIMP_HAVE_CALLGRIND 1
#endif
#endif

#ifdef SIMP_HAVE_CALLGRIND
int simp_callgrind_running(void) { return RUNNING_ON_VALGRIND ? 1 : 0; }
void simp_callgrind_start_instrumentation(void) { CALLGRIND_START_INSTRUMENTATION; }
void simp_callgrind_toggle_collect(void) { CALLGRIND_TOGGLE_COLLECT; }
void simp_callgrind_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
#else
int simp_callgrind_running(void) { return 0; }
void simp_callgrind_start_instrumentation(void) {}
void simp_callgrind_toggle_collect(void) {}
void simp_callgrind_dump(const char *name) { (void)name; }
#endif
