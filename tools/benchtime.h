// benchtime.h: clocks, CPU times and latency percentiles shared by the C tools of
// scripts/bench-compare (udplimit, mqttbench, simpload). Each includes it once; everything is static inline.
#ifndef SIMP_BENCHTIME_H
#define SIMP_BENCHTIME_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/// Monotonic clock, seconds.
static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/// CPU time of the calling thread, seconds.
static inline double thread_cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/// User + system CPU time of this process, seconds.
static inline double own_cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
}

/// utime + stime of `pid` in seconds (fields 14 and 15 of /proc/PID/stat), or -1.
static inline double process_cpu_seconds(int pid) {
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *file = fopen(path, "r");
    if (!file) return -1;
    size_t length = fread(line, 1, sizeof line - 1, file);
    fclose(file);
    line[length] = 0;
    char *field = strrchr(line, ')'); // the command name may hold spaces and parentheses
    unsigned long user = 0, system = 0;
    if (!field || sscanf(field + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &user, &system) != 2) return -1;
    return (double)(user + system) / sysconf(_SC_CLK_TCK);
}

static inline int compare_floats(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/// Sorts `count` latencies (seconds) in place so that `percentile_us` can read them.
static inline void sort_latencies(float *latencies, long count) {
    qsort(latencies, (size_t)count, sizeof(float), compare_floats);
}

/// The `share` percentile (0.5, 0.99, 1 for the maximum) of sorted latencies, in µs; 0 without any.
static inline double percentile_us(const float *sorted, long count, double share) {
    return count ? sorted[(long)(share * (double)(count - 1))] * 1e6 : 0;
}

#endif
