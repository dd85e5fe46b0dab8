// udplimit: the raw-UDP forwarding limit of this machine, the physical reference for the relay.
//
// Three threads over loopback: a generator sends SIZE-byte datagrams as fast as it can to a
// forwarder, which moves them to a sink, 64 per recvmmsg/sendmmsg call. After a 0.5 s warm-up it
// counts what the sink receives for SECONDS and prints one JSON object: datagrams per second
// arriving at the sink, and the forwarder thread's CPU time per forwarded datagram.
//
// With a RATE, the generator instead sends RATE datagrams per second, one at a time and evenly
// spaced, and the forwarder passes each on as soon as it arrives (MSG_WAITFORONE): the CPU a
// forwarder that holds nothing back spends per datagram at that rate, the floor under any
// relay's CPU per message at the same fixed rate (each wake-up is paid for one datagram).
//
// Usage: udplimit [SECONDS [SIZE [RATE]]]      (defaults 3, 200 and 0: as fast as it goes)
// Build: cc -O2 -pthread -o udplimit tools/udplimit.c
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "benchtime.h"

#define BATCH 64
#define SLOT 2048

static int size;
static double rate;                // datagrams per second offered; 0: as fast as it goes
static atomic_int stop;
static atomic_long received;       // datagrams the sink got
static atomic_long forwarded;      // datagrams the forwarder sent on
static _Atomic double forwarder_cpu; // forwarder thread CPU seconds, sampled by itself
static int forwarder_socket, sink_socket;
static struct sockaddr_in forwarder_address, sink_address;

// A UDP socket on 127.0.0.1 (a free port), large buffers, 100 ms receive timeout so threads see
// `stop`; its address goes to *address when given.
static int loopback_socket(struct sockaddr_in *address) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    int bytes = 8 << 20;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    setsockopt(s, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &length)) {
        perror("udplimit: bind");
        exit(1);
    }
    struct timeval timeout = {0, 100000};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (address) *address = a;
    return s;
}

// Points the BATCH message headers at BATCH slots of `buffers`, each `length` bytes, addressed to `to`.
static void prepare(struct mmsghdr *messages, struct iovec *vectors, char (*buffers)[SLOT], size_t length,
                    struct sockaddr_in *to) {
    for (int i = 0; i < BATCH; i++) {
        vectors[i].iov_base = buffers[i];
        vectors[i].iov_len = length;
        memset(&messages[i], 0, sizeof messages[i]);
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
        messages[i].msg_hdr.msg_name = to;
        messages[i].msg_hdr.msg_namelen = to ? sizeof *to : 0;
    }
}

static void *generate(void *unused) {
    static char buffers[BATCH][SLOT];
    struct mmsghdr messages[BATCH];
    struct iovec vectors[BATCH];
    int s = loopback_socket(NULL);
    memset(buffers, 'x', sizeof buffers);
    prepare(messages, vectors, buffers, size, &forwarder_address);
    if (rate <= 0) {
        while (!stop) sendmmsg(s, messages, BATCH, 0);
        return unused;
    }
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    long gap = (long)(1e9 / rate);
    while (!stop) {
        next.tv_nsec += gap;
        while (next.tv_nsec >= 1000000000L) { next.tv_nsec -= 1000000000L; next.tv_sec += 1; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        sendmmsg(s, messages, 1, 0);
    }
    return unused;
}

static void *forward(void *unused) {
    static char buffers[BATCH][SLOT];
    struct mmsghdr messages[BATCH];
    struct iovec vectors[BATCH];
    int out = loopback_socket(NULL);
    long count = 0;
    while (!stop) {
        prepare(messages, vectors, buffers, SLOT, NULL);
        int n = recvmmsg(forwarder_socket, messages, BATCH, rate > 0 ? MSG_WAITFORONE : 0, NULL);
        if (n <= 0) continue;
        for (int i = 0; i < n; i++) {
            vectors[i].iov_len = messages[i].msg_len;
            messages[i].msg_hdr.msg_name = &sink_address;
            messages[i].msg_hdr.msg_namelen = sizeof sink_address;
        }
        int sent = sendmmsg(out, messages, n, 0);
        if (sent > 0) count += sent;
        forwarded = count;
        forwarder_cpu = thread_cpu_seconds();
    }
    return unused;
}

static void *sink(void *unused) {
    static char buffers[BATCH][SLOT];
    struct mmsghdr messages[BATCH];
    struct iovec vectors[BATCH];
    while (!stop) {
        prepare(messages, vectors, buffers, SLOT, NULL);
        int n = recvmmsg(sink_socket, messages, BATCH, rate > 0 ? MSG_WAITFORONE : 0, NULL);
        if (n > 0) received += n;
    }
    return unused;
}

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: udplimit [SECONDS [SIZE [RATE]]]   raw-UDP forwarding limit over loopback (JSON on stdout);\n"
               "       with RATE (datagrams/s, evenly spaced): the forwarder's CPU per datagram at that rate\n");
        return 0;
    }
    double seconds = argc > 1 ? atof(argv[1]) : 3;
    size = argc > 2 ? atoi(argv[2]) : 200;
    rate = argc > 3 ? atof(argv[3]) : 0;
    if (seconds <= 0 || size < 1 || size > SLOT || rate < 0 || rate > 1e7) {
        fprintf(stderr, "udplimit: SECONDS must be positive, SIZE 1-%d and RATE 0-10000000\n", SLOT);
        return 2;
    }
    forwarder_socket = loopback_socket(&forwarder_address);
    sink_socket = loopback_socket(&sink_address);
    pthread_t threads[3];
    pthread_create(&threads[2], NULL, sink, NULL);
    pthread_create(&threads[1], NULL, forward, NULL);
    pthread_create(&threads[0], NULL, generate, NULL);
    usleep(500000);
    long received0 = received, forwarded0 = forwarded;
    double cpu0 = forwarder_cpu, start = now();
    usleep((useconds_t)(seconds * 1e6));
    long received1 = received, forwarded1 = forwarded;
    double cpu1 = forwarder_cpu, elapsed = now() - start;
    stop = 1;
    for (int i = 0; i < 3; i++) pthread_join(threads[i], NULL);
    long moved = forwarded1 - forwarded0;
    printf("{\"tool\":\"udplimit\",\"size\":%d,\"offered_rate\":%.0f,\"seconds\":%.3f,\"delivered_rate\":%.0f,"
           "\"forwarder_cpu_seconds\":%.4f,\"forwarder_cpu_us_per_datagram\":%.4f}\n",
           size, rate, elapsed, (received1 - received0) / elapsed, cpu1 - cpu0,
           moved > 0 ? (cpu1 - cpu0) * 1e6 / moved : 0.0);
    return 0;
}
