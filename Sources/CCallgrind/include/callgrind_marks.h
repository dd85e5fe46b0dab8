#ifndef SIMP_CALLGRIND_MARKS_H
#define SIMP_CALLGRIND_MARKS_H

/// Nonzero when the process runs under valgrind (and the headers were there at build time).
int simp_callgrind_running(void);

/// Starts callgrind's instrumentation (run with --instr-atstart=no: what ran before is not
/// simulated, so a workload's setup costs no valgrind time). Nothing outside valgrind.
void simp_callgrind_start_instrumentation(void);

/// Turns the counting of instructions on or off (run with --collect-atstart=no: counting
/// starts off). Nothing outside valgrind.
void simp_callgrind_toggle_collect(void);

/// Writes what was counted since the previous dump to a file of its own, described as
/// `name`, and starts counting from zero. Nothing outside valgrind.
void simp_callgrind_dump(const char *name);

#endif
