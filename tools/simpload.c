// simpload: a SIMP load generator in C, to measure the relay's own limit with a client as lean as
// mqttbench is for mosquitto (simp-bench, in Swift, costs about twice the relay per message).
//
// PAIRS sender -> receiver pairs against a relay started with --no-login (docs/PROTOCOL.md): each
// user logs in with CONNECT on its own control connection; every sender of a worker thread shares
// one UDP socket and every receiver another, as simp-bench's do. Senders offer RATE messages per
// second in total (each a sealed TEXT of SIZE bytes whose content starts with its send time),
// evenly spaced in ticks of at least 50 µs, skipping a pair with WINDOW messages unreceipted
// (default 1024: the protocol's limit on the ids a sender has in flight, docs/PROTOCOL.md §9;
// with receipts held up to 10 ms, a window of 100 would cap each pair near 10,000 msg/s).
// Receivers open, decode and deduplicate each datagram and answer with batch receipts (held up to
// --receipt-delay-us, at most 255 ids), on the control connection and as a sealed datagram copy,
// as the reference client does. Senders count a message once when either copy of its receipt
// arrives. Messages are unordered (stream 0) and never retransmitted: a lost one counts as
// unresolved, which makes the rate not sustained. Being a load tool on loopback, it also leaves
// out what docs/PROTOCOL.md §9 asks of a client for the internet: HELLO, the replay window, its
// own PINGs (it answers the relay's), reconnecting.
//
// After --warmup seconds it measures for --seconds: offered, delivered and receipted rates,
// send -> delivered latency percentiles (delivered: the kernel queued the relay's datagram on the
// receiver's socket, SO_TIMESTAMPNS, so the generator's own lateness in reading is not counted),
// the relay's CPU (/proc/PID/stat of --relay-pid) and its own (user and kernel, and its wake-ups),
// each per delivered message. With --find-max it searches, like simp-bench --find-max, for the
// highest rate whose offered, delivered and receipted rates are within 2 % of it, with p99 <= 10
// ms and nothing unresolved, each step with fresh connections, and prints each step's rates and
// both CPUs on standard error. Prints one JSON object in simp-bench's shape.
// What a message costs the generator: one clock read, a pack and a seal into a sendmmsg batch;
// at the receiver an open and a decode into a per-thread arena (no malloc), a bit set; receipts
// in batches. Its wake-ups (kernel time) cost it more than all of that: see --no-wake-on-arrival.
//
// Two relays (--receiver-port): every pair's sender logs in to the relay on --port and its
// receiver to the one on --receiver-port, relays sharing one Redis, so every message and every
// receipt crosses between them through Redis pub/sub (docs/OPERATIONS.md §1). --receiver-relay-pid
// and --redis-pid add those processes' CPU to the report.
// One relay on several loops (--relay-threads N, simp-server --threads N): a session's loop is
// its id's low 32 bits modulo N (SessionIdClass); --placement same|cross logs a receiver in again
// (a new connection, which the kernel may hash to another loop) until it is on its sender's loop,
// or on another, so the relay's cost with and without a cross-loop hand-off can be told apart.
// The report gives the relay's per-thread CPU (/proc/PID/task) and how many pairs crossed loops.
//
// Build: cc -O2 -pthread -I Sources/CSIMPProto/include -o simpload tools/simpload.c
//        Sources/CSIMPProto/simp.pb-c.c -lprotobuf-c -lcrypto
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "benchtime.h"
#include "simp.pb-c.h"

#define BATCH 64
#define SLOT 2048
#define HEADER 17
#define TAG 16
#define MAX_BATCH_IDS 255
#define MAX_WORKERS 16

enum placement { PLACE_ANY, PLACE_SAME, PLACE_CROSS };

static struct {
    const char *host;
    int port, pairs, size, window, workers, relay_pid, find_max;
    double rate, seconds, warmup, receipt_delay, max_p99_ms;
    int receiver_port, receiver_relay_pid, redis_pid, relay_threads;
    enum placement placement;
    int wake_on_arrival;
} options = {"127.0.0.1", 0, 10, 200, 1024, 2, 0, 0, 10000, 5, 1, 0.010, 10, 0, 0, 0, 1, PLACE_ANY, 1};

static void fail(const char *what) {
    fprintf(stderr, "simpload: %s\n", what);
    exit(1);
}

// MARK: Keys and seals (docs/PROTOCOL.md §5.1)

/// HKDF-SHA-256 with one output block (32 bytes).
static void hkdf(const uint8_t *ikm, size_t ikm_length, const uint8_t *salt, size_t salt_length, const char *info, uint8_t out[32]) {
    uint8_t prk[32], block[128];
    unsigned length = 32;
    HMAC(EVP_sha256(), salt, (int)salt_length, ikm, ikm_length, prk, &length);
    size_t info_length = strlen(info);
    memcpy(block, info, info_length);
    block[info_length] = 1;
    HMAC(EVP_sha256(), prk, 32, block, info_length + 1, out, &length);
}

static EVP_CIPHER_CTX *aead(const uint8_t key[32], int encrypt) {
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    if (!context || !EVP_CipherInit_ex(context, EVP_aes_256_gcm(), NULL, key, NULL, encrypt)) fail("AES-256-GCM unavailable");
    return context;
}

/// One side of a session: its control connection, keys and datagram counter.
struct session {
    int control;
    uint64_t id, counter;
    EVP_CIPHER_CTX *seal, *open; // uplink (client -> relay), downlink (relay -> client)
    char user[64];
    uint8_t input[1 << 16];      // control bytes not yet framed
    size_t input_length;
};

static void put64(uint8_t *to, uint64_t value) {
    for (int i = 7; i >= 0; i--, value >>= 8) to[i] = (uint8_t)value;
}

static uint64_t get64(const uint8_t *from) {
    uint64_t value = 0;
    for (int i = 0; i < 8; i++) value = value << 8 | from[i];
    return value;
}

/// Seals `message` into `out` (at least SLOT bytes); returns the datagram's length.
static size_t seal(struct session *session, const Simp__Message *message, uint8_t *out) {
    size_t length = simp__message__get_packed_size(message);
    if (HEADER + length + TAG > SLOT) fail("message too large for a datagram");
    uint8_t plain[SLOT], nonce[12] = {0};
    simp__message__pack(message, plain);
    out[0] = 0xA2;
    put64(out + 1, session->id);
    put64(out + 9, ++session->counter);
    memcpy(nonce + 4, out + 9, 8);
    int written;
    EVP_CIPHER_CTX *context = session->seal;
    if (!EVP_EncryptInit_ex(context, NULL, NULL, NULL, nonce) || !EVP_EncryptUpdate(context, NULL, &written, out, HEADER) ||
        !EVP_EncryptUpdate(context, out + HEADER, &written, plain, (int)length) || !EVP_EncryptFinal_ex(context, out + HEADER + length, &written) ||
        !EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, TAG, out + HEADER + length))
        fail("AES-GCM seal failed");
    return HEADER + length + TAG;
}

/// Where a worker thread decodes datagrams: protobuf-c allocates a decoded message's parts from
/// it, one message at a time (reset before each decode), so a delivered message costs no malloc;
/// anything larger than what is left falls back to malloc.
struct arena {
    size_t used;
    int spilled; // something of the current message came from malloc
    _Alignas(16) uint8_t bytes[1 << 16];
};
static __thread struct arena decode_arena;

static void *arena_alloc(void *data, size_t size) {
    struct arena *arena = data;
    size = (size + 15) & ~(size_t)15;
    if (size > sizeof arena->bytes - arena->used) {
        arena->spilled = 1;
        return malloc(size);
    }
    void *at = arena->bytes + arena->used;
    arena->used += size;
    return at;
}

static void arena_free(void *data, void *pointer) {
    struct arena *arena = data;
    if ((uint8_t *)pointer < arena->bytes || (uint8_t *)pointer >= arena->bytes + sizeof arena->bytes) free(pointer);
}

static __thread ProtobufCAllocator arena_allocator = {arena_alloc, arena_free, NULL};

/// Opens a datagram sealed for `session`; returns the decoded message (free it with
/// free_datagram before opening the next) or NULL.
static Simp__Message *open_datagram(struct session *session, uint8_t *bytes, size_t length) {
    if (length < HEADER + TAG || bytes[0] != 0xA2) return NULL;
    uint8_t nonce[12] = {0}, plain[SLOT];
    memcpy(nonce + 4, bytes + 9, 8);
    size_t payload = length - HEADER - TAG;
    int written;
    EVP_CIPHER_CTX *context = session->open;
    if (!EVP_DecryptInit_ex(context, NULL, NULL, NULL, nonce) || !EVP_DecryptUpdate(context, NULL, &written, bytes, HEADER) ||
        !EVP_DecryptUpdate(context, plain, &written, bytes + HEADER, (int)payload) ||
        !EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, TAG, bytes + length - TAG) ||
        EVP_DecryptFinal_ex(context, plain + written, &written) <= 0)
        return NULL;
    decode_arena.used = 0, decode_arena.spilled = 0;
    arena_allocator.allocator_data = &decode_arena;
    return simp__message__unpack(&arena_allocator, payload, plain);
}

/// Frees a decoded datagram: nothing to do unless part of it spilled out of the arena.
static void free_datagram(Simp__Message *message) {
    if (decode_arena.spilled) simp__message__free_unpacked(message, &arena_allocator);
}

// MARK: Control connections (docs/PROTOCOL.md §3, §4.2)

static void write_frame(int control, const Simp__Message *message) {
    size_t length = simp__message__get_packed_size(message);
    uint8_t frame[4 + 8192];
    if (length > 8192) fail("control frame too large");
    frame[0] = (uint8_t)(length >> 24), frame[1] = (uint8_t)(length >> 16), frame[2] = (uint8_t)(length >> 8), frame[3] = (uint8_t)length;
    simp__message__pack(message, frame + 4);
    for (size_t done = 0; done < length + 4;) {
        ssize_t n = write(control, frame + done, length + 4 - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("control connection write failed");
        done += (size_t)n;
    }
}

/// Reads what the connection has; returns the next complete frame's message (caller frees), or
/// NULL when none is complete. `blocking`: wait for bytes.
static Simp__Message *read_frame(struct session *session, int blocking) {
    for (;;) {
        if (session->input_length >= 4) {
            const uint8_t *in = session->input;
            size_t length = (size_t)in[0] << 24 | (size_t)in[1] << 16 | (size_t)in[2] << 8 | in[3];
            if (length > sizeof session->input - 4) fail("control frame larger than simpload reads");
            if (session->input_length >= 4 + length) {
                Simp__Message *message = simp__message__unpack(NULL, length, in + 4);
                memmove(session->input, in + 4 + length, session->input_length - 4 - length);
                session->input_length -= 4 + length;
                if (!message) fail("malformed control frame from the relay");
                return message;
            }
        }
        ssize_t n = recv(session->control, session->input + session->input_length, sizeof session->input - session->input_length,
                         blocking ? 0 : MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return NULL;
        if (n <= 0) fail("the relay closed a control connection");
        session->input_length += (size_t)n;
    }
}

/// Logs `user` in to the relay on control port `port` (development relay: CONNECT without proof)
/// with `udp_port` as its datagram port; `relay_udp` becomes that relay's datagram address.
static void login(struct session *session, const char *user, int port, int udp_port, struct sockaddr_in *relay_udp, int *batches) {
    struct sockaddr_in relay = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, options.host, &relay.sin_addr) != 1) fail("--host must be an IPv4 address");
    session->control = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(session->control, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(session->control, (struct sockaddr *)&relay, sizeof relay)) fail("cannot connect to the relay's control port");
    snprintf(session->user, sizeof session->user, "%s", user);
    Simp__Message connect_message = SIMP__MESSAGE__INIT;
    connect_message.version = 1;
    connect_message.type = SIMP__MESSAGE__TYPE__CONNECT;
    connect_message.fromuser = session->user;
    connect_message.udpport = (uint32_t)udp_port;
    connect_message.acceptsbatchreceipts = 1; // it settles every id of a batch receipt (§6.1)
    write_frame(session->control, &connect_message);
    for (;;) {
        Simp__Message *message = read_frame(session, 1);
        if (message->type == SIMP__MESSAGE__TYPE__ERROR) {
            fprintf(stderr, "simpload: the relay refused %s: %s (a relay for simpload runs with --no-login)\n", user, message->errortext);
            exit(1);
        }
        if (message->type != SIMP__MESSAGE__TYPE__CONNECTED) {
            simp__message__free_unpacked(message, NULL);
            continue;
        }
        if (message->sessionsecret.len == 0) fail("CONNECTED without a session secret: the relay requires passwords (use --no-login)");
        session->id = message->sessionid;
        uint8_t salt[8], uplink[32], downlink[32];
        put64(salt, session->id);
        hkdf(message->sessionsecret.data, message->sessionsecret.len, salt, 8, "simp v1 uplink", uplink);
        hkdf(message->sessionsecret.data, message->sessionsecret.len, salt, 8, "simp v1 downlink", downlink);
        session->seal = aead(uplink, 1);
        session->open = aead(downlink, 0);
        *relay_udp = relay;
        relay_udp->sin_port = htons((uint16_t)message->udpport);
        *batches = message->batchreceipts;
        simp__message__free_unpacked(message, NULL);
        return;
    }
}

// MARK: Pairs and workers

/// Which ids of a sender's (consecutive) ids were seen: bits from its first id.
struct id_bits {
    uint64_t first;
    uint64_t *words;
    size_t count;
};

/// Sets `id`'s bit; returns 0 if it was set already or lies outside the sender's ids so far.
static int mark(struct id_bits *bits, uint64_t id, uint64_t next_id) {
    if (id < bits->first || id >= next_id) return 0;
    size_t word = (id - bits->first) / 64;
    uint64_t bit = 1ULL << ((id - bits->first) % 64);
    if (word >= bits->count) {
        size_t count = bits->count ? bits->count : 1024;
        while (count <= word) count *= 2;
        bits->words = realloc(bits->words, count * 8);
        memset(bits->words + bits->count, 0, (count - bits->count) * 8);
        bits->count = count;
    }
    if (bits->words[word] & bit) return 0;
    bits->words[word] |= bit;
    return 1;
}

struct pair {
    struct session sender, receiver;
    uint64_t next_id; // ids sent: the bitmaps' `first` ..< next_id (both sides of a pair are on one thread)
    long unresolved;            // offered, not yet receipted
    struct id_bits receipted, delivered;
    // The receiver's batch: ids waiting for their receipt, and the one the receipt names.
    uint64_t batch[MAX_BATCH_IDS];
    int batch_count;
    uint64_t last_id;
    uint32_t last_attempt;
    double last_arrival, oldest_arrival;
    size_t content_length;
};

struct worker {
    struct pair *pairs;
    int count;
    int sender_udp, receiver_udp, epoll, cross_loop_pairs;
    struct sockaddr_in relay_udp, receiver_relay_udp; // the senders' relay, the receivers'
    double rate;
    // Counts inside the window (latency: messages sent inside it).
    long offered, skipped, delivered, receipted, duplicates, unresolved;
    long lag_us;
    float *latencies;
    long latency_count, latency_capacity;
    pthread_t thread;
};

static double window_start, window_end, run_start, drain_end;
static double wall_minus_monotonic; // CLOCK_REALTIME - now(), set before each step
static size_t datagram_bytes; // a first transmission's sealed size

static int udp_socket(void) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    int bytes = 4 << 20;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    int one = 1; // the kernel stamps each datagram as it queues it (read_datagrams)
    if (setsockopt(s, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one)) fail("SO_TIMESTAMPNS unavailable");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(s, (struct sockaddr *)&a, sizeof a)) fail("cannot bind a UDP socket");
    return s;
}

static int port_of(int s) {
    struct sockaddr_in a;
    socklen_t length = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &length);
    return ntohs(a.sin_port);
}

static void watch(struct worker *worker, int fd, uint64_t tag) {
    struct epoll_event event = {.events = EPOLLIN, .data.u64 = tag};
    if (epoll_ctl(worker->epoll, EPOLL_CTL_ADD, fd, &event)) fail("epoll_ctl failed");
}

// Event tags: the two UDP sockets, then 2 per pair (sender's and receiver's control connection).
enum { TAG_SENDER_UDP = 0, TAG_RECEIVER_UDP = 1, TAG_CONTROL = 2 };

/// The loop of a relay started with --threads N that holds session `id` (SessionIdClass).
static int loop_of(uint64_t id) { return (int)((uint32_t)id % (uint32_t)options.relay_threads); }

static void end_session(struct session *session) {
    close(session->control);
    EVP_CIPHER_CTX_free(session->seal);
    EVP_CIPHER_CTX_free(session->open);
}

/// Logs pair's receiver in (as `user`, then `user-rK` on retries) until --placement is met.
static void place_receiver(struct worker *worker, struct pair *pair, const char *user, int *batches) {
    char name[64];
    snprintf(name, sizeof name, "%s", user);
    for (int attempt = 1;; attempt++) {
        pair->receiver.input_length = 0;
        login(&pair->receiver, name, options.receiver_port, port_of(worker->receiver_udp), &worker->receiver_relay_udp, batches);
        int cross = loop_of(pair->receiver.id) != loop_of(pair->sender.id);
        if (options.placement == PLACE_ANY || cross == (options.placement == PLACE_CROSS)) {
            worker->cross_loop_pairs += cross;
            return;
        }
        if (attempt == 200) fail("--placement: 200 connections all landed on the wrong loop (is --relay-threads the relay's --threads?)");
        end_session(&pair->receiver);
        snprintf(name, sizeof name, "%s-r%d", user, attempt);
    }
}

static void connect_worker(struct worker *worker, int first_pair, unsigned prefix) {
    worker->sender_udp = udp_socket();
    worker->receiver_udp = udp_socket();
    worker->epoll = epoll_create1(0);
    watch(worker, worker->sender_udp, TAG_SENDER_UDP);
    watch(worker, worker->receiver_udp, TAG_RECEIVER_UDP);
    for (int i = 0; i < worker->count; i++) {
        struct pair *pair = &worker->pairs[i];
        char from[64], to[64];
        snprintf(from, sizeof from, "load-%08x-%d-a", prefix, first_pair + i);
        snprintf(to, sizeof to, "load-%08x-%d-b", prefix, first_pair + i);
        int batches_a, batches_b;
        login(&pair->sender, from, options.port, port_of(worker->sender_udp), &worker->relay_udp, &batches_a);
        place_receiver(worker, pair, to, &batches_b);
        if (!batches_b) fail("the relay does not route batch receipts (docs/PROTOCOL.md §6.1)");
        watch(worker, pair->sender.control, TAG_CONTROL + 2 * (uint64_t)i);
        watch(worker, pair->receiver.control, TAG_CONTROL + 2 * (uint64_t)i + 1);
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        pair->next_id = (uint64_t)wall.tv_sec * 1000000 + (uint64_t)wall.tv_nsec / 1000;
        pair->receipted.first = pair->delivered.first = pair->next_id;
        // The content's length that makes a first transmission, sealed, SIZE bytes.
        char probe[SLOT];
        memset(probe, 'x', sizeof probe);
        Simp__Message message = SIMP__MESSAGE__INIT;
        message.version = 1, message.messageid = pair->next_id, message.time = wall.tv_sec * 1000, message.attempt = 1;
        message.fromuser = pair->sender.user, message.touser = pair->receiver.user, message.content = probe;
        size_t length = 16; // the send time, in hex
        for (;; length++) {
            probe[length] = 0;
            if (HEADER + simp__message__get_packed_size(&message) + TAG >= (size_t)options.size || length > SLOT - 200) break;
            probe[length] = 'x';
        }
        pair->content_length = length < 16 ? 16 : length;
        probe[pair->content_length] = 0;
        datagram_bytes = HEADER + simp__message__get_packed_size(&message) + TAG;
    }
}

static void close_worker(struct worker *worker) {
    for (int i = 0; i < worker->count; i++) {
        struct pair *pair = &worker->pairs[i];
        end_session(&pair->sender);
        end_session(&pair->receiver);
        free(pair->receipted.words);
        free(pair->delivered.words);
    }
    close(worker->sender_udp);
    close(worker->receiver_udp);
    close(worker->epoll);
}

/// A receipt (single or batch) for pair's sender: each id it names counts once.
static void receipt_arrived(struct worker *worker, struct pair *pair, const Simp__Message *receipt) {
    uint64_t next = pair->next_id, id = 0;
    double at = now();
    int measuring = at >= window_start && at < window_end;
    if (mark(&pair->receipted, receipt->messageid, next)) {
        pair->unresolved--;
        if (measuring) worker->receipted++;
    }
    for (size_t i = 0; i < receipt->n_receiptids; i++) {
        id += receipt->receiptids[i]; // written as differences (§6.1)
        if (mark(&pair->receipted, id, next)) {
            pair->unresolved--;
            if (measuring) worker->receipted++;
        }
    }
}

/// Sends pair's receiver's batch: a RECEIPT frame and its sealed datagram copy.
static void send_receipts(struct worker *worker, struct pair *pair, double at) {
    if (pair->batch_count == 0) return;
    uint64_t differences[MAX_BATCH_IDS];
    size_t others = 0;
    uint64_t previous = 0;
    for (int i = 0; i < pair->batch_count; i++) {
        if (pair->batch[i] == pair->last_id) continue;
        differences[others++] = pair->batch[i] - previous; // ascending: see read_datagrams
        previous = pair->batch[i];
    }
    Simp__Message receipt = SIMP__MESSAGE__INIT;
    receipt.version = 1;
    receipt.type = SIMP__MESSAGE__TYPE__RECEIPT;
    receipt.messageid = pair->last_id;
    receipt.attempt = pair->last_attempt;
    double hold = (at - pair->last_arrival) * 1e6;
    receipt.holdmicros = hold < 0 ? 0 : hold > 4e9 ? 4000000000u : (uint32_t)hold;
    receipt.fromuser = pair->receiver.user;
    receipt.touser = pair->sender.user;
    receipt.n_receiptids = others;
    receipt.receiptids = differences;
    write_frame(pair->receiver.control, &receipt);
    uint8_t datagram[SLOT];
    size_t length = seal(&pair->receiver, &receipt, datagram);
    sendto(worker->receiver_udp, datagram, length, 0, (struct sockaddr *)&worker->receiver_relay_udp, sizeof worker->receiver_relay_udp);
    pair->batch_count = 0;
}

static struct pair *pair_by_session(struct worker *worker, uint64_t id, int receiver) {
    for (int i = 0; i < worker->count; i++) {
        struct session *session = receiver ? &worker->pairs[i].receiver : &worker->pairs[i].sender;
        if (session->id == id) return &worker->pairs[i];
    }
    return NULL;
}

/// When the kernel queued a received datagram (SO_TIMESTAMPNS, wall clock) on the monotonic
/// clock of now(); `otherwise` if the datagram carries no timestamp.
static double arrival_time(struct msghdr *header, double otherwise) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(header); c; c = CMSG_NXTHDR(header, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec wall;
            memcpy(&wall, CMSG_DATA(c), sizeof wall);
            return wall.tv_sec + wall.tv_nsec / 1e9 - wall_minus_monotonic;
        }
    return otherwise;
}

/// Reads one burst of datagrams (at most BATCH) from a worker's UDP socket: messages for its
/// receivers, or receipt copies for its senders; returns how many it read. A message's arrival
/// is the kernel's timestamp, so reading it a tick later does not make its latency longer.
static int read_datagrams(struct worker *worker, int receivers) {
    static __thread uint8_t buffers[BATCH][SLOT];
    static __thread uint8_t controls[BATCH][CMSG_SPACE(sizeof(struct timespec))];
    struct mmsghdr messages[BATCH];
    struct iovec vectors[BATCH];
    for (int i = 0; i < BATCH; i++) {
        vectors[i] = (struct iovec){buffers[i], SLOT};
        messages[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &vectors[i], .msg_iovlen = 1, .msg_control = controls[i],
                                                   .msg_controllen = sizeof controls[i]}};
    }
    int n = recvmmsg(receivers ? worker->receiver_udp : worker->sender_udp, messages, BATCH, MSG_DONTWAIT, NULL);
    double read_at = now(), at = read_at;
    for (int i = 0; i < n; i++) {
        uint8_t *bytes = buffers[i];
        size_t length = messages[i].msg_len;
        if (length < HEADER + TAG) continue;
        struct pair *pair = pair_by_session(worker, get64(bytes + 1), receivers);
        if (!pair) continue;
        Simp__Message *message = open_datagram(receivers ? &pair->receiver : &pair->sender, bytes, length);
        if (!message) continue;
        at = arrival_time(&messages[i].msg_hdr, read_at);
        if (!receivers) {
            if (message->type == SIMP__MESSAGE__TYPE__RECEIPT) receipt_arrived(worker, pair, message);
        } else if (message->type == SIMP__MESSAGE__TYPE__TEXT) {
            if (!mark(&pair->delivered, message->messageid, pair->next_id)) {
                if (at >= window_start && at < window_end) worker->duplicates++;
            } else {
                uint64_t stamp = 0; // 16 hex digits (offer)
                for (int digit = 0; digit < 16 && message->content[digit]; digit++)
                    stamp = stamp << 4 | (uint64_t)(message->content[digit] <= '9' ? message->content[digit] - '0' : message->content[digit] - 'a' + 10);
                double sent = (double)stamp / 1e6;
                if (sent >= window_start && sent < window_end) {
                    worker->delivered++;
                    if (worker->latency_count == worker->latency_capacity) {
                        worker->latency_capacity = worker->latency_capacity ? worker->latency_capacity * 2 : 1 << 16;
                        worker->latencies = realloc(worker->latencies, worker->latency_capacity * sizeof(float));
                    }
                    worker->latencies[worker->latency_count++] = (float)(at - sent);
                }
            }
            // Receipted either way: a duplicate's earlier receipt may have been lost. A batch's
            // ids are strictly ascending (§6.1): an id out of order goes in the next batch.
            if (pair->batch_count > 0 && message->messageid <= pair->batch[pair->batch_count - 1]) send_receipts(worker, pair, at);
            if (pair->batch_count == 0) pair->oldest_arrival = at;
            pair->batch[pair->batch_count++] = message->messageid;
            pair->last_id = message->messageid;
            pair->last_attempt = message->attempt;
            pair->last_arrival = at;
            if (pair->batch_count == MAX_BATCH_IDS) send_receipts(worker, pair, at);
        }
        free_datagram(message);
    }
    if (receivers && options.receipt_delay <= 0)
        for (int i = 0; i < worker->count; i++) send_receipts(worker, &worker->pairs[i], read_at);
    return n;
}

/// Handles what a control connection has: PING (answered), RECEIPT frames (for senders).
static void read_control(struct worker *worker, struct pair *pair, int receiver) {
    struct session *session = receiver ? &pair->receiver : &pair->sender;
    Simp__Message *message;
    while ((message = read_frame(session, 0))) {
        if (message->type == SIMP__MESSAGE__TYPE__PING) {
            Simp__Message pong = SIMP__MESSAGE__INIT;
            pong.version = 1, pong.type = SIMP__MESSAGE__TYPE__PONG, pong.messageid = message->messageid, pong.time = message->time;
            write_frame(session->control, &pong);
        } else if (!receiver && message->type == SIMP__MESSAGE__TYPE__RECEIPT) {
            receipt_arrived(worker, pair, message);
        }
        simp__message__free_unpacked(message, NULL);
    }
}

/// Offers `count` messages round robin over the worker's pairs, in one sendmmsg.
static void offer(struct worker *worker, int count, int *next_pair, int counted) {
    static __thread uint8_t buffers[BATCH][SLOT];
    struct mmsghdr messages[BATCH];
    struct iovec vectors[BATCH];
    int ready = 0;
    char content[SLOT];
    for (int k = 0; k < count; k++) {
        struct pair *pair = &worker->pairs[*next_pair];
        *next_pair = (*next_pair + 1) % worker->count;
        if (counted) worker->offered++;
        if (options.window > 0 && pair->unresolved >= options.window) {
            if (counted) worker->skipped++;
            continue;
        }
        // One clock read a message: its send time (monotonic µs, 16 hex digits), and its wall time.
        double sent = now();
        uint64_t stamp = (uint64_t)(sent * 1e6);
        for (int digit = 15; digit >= 0; digit--, stamp >>= 4) content[digit] = "0123456789abcdef"[stamp & 15];
        memset(content + 16, 'x', pair->content_length - 16);
        content[pair->content_length] = 0;
        Simp__Message message = SIMP__MESSAGE__INIT;
        message.version = 1, message.messageid = pair->next_id, message.time = (int64_t)((sent + wall_minus_monotonic) * 1000);
        message.attempt = 1, message.fromuser = pair->sender.user, message.touser = pair->receiver.user, message.content = content;
        vectors[ready] = (struct iovec){buffers[ready], seal(&pair->sender, &message, buffers[ready])};
        messages[ready] = (struct mmsghdr){.msg_hdr = {.msg_name = &worker->relay_udp, .msg_namelen = sizeof worker->relay_udp,
                                                       .msg_iov = &vectors[ready], .msg_iovlen = 1}};
        pair->next_id++;
        pair->unresolved++;
        if (++ready == BATCH) {
            sendmmsg(worker->sender_udp, messages, ready, 0);
            ready = 0;
        }
    }
    if (ready) sendmmsg(worker->sender_udp, messages, ready, 0);
}

/// Sleeps until `when` (now()'s clock).
static void sleep_until(double when) {
    struct timespec t = {(time_t)when, (long)((when - (time_t)when) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {}
}

/// Waits until `wake`, then handles what the worker's sockets hold: datagrams (every burst
/// queued), receipt frames and PINGs on the control connections. With --wake-on-arrival (the
/// default) it waits on the sockets, so whatever arrives ends the wait early: the relay's sends
/// wake a waiting client, as a client waiting for its messages is woken. With
/// --no-wake-on-arrival it sleeps to `wake` and reads what arrived meanwhile: no wake-up per
/// datagram for the generator, and none for the relay's sends to pay.
static void wait_and_read(struct worker *worker, double wake) {
    struct epoll_event events[64];
    double wait = 0;
    if (options.wake_on_arrival) wait = wake - now();
    else sleep_until(wake);
    struct timespec timeout = {(time_t)(wait > 0 ? wait : 0), (long)((wait > 0 ? wait - (time_t)wait : 0) * 1e9)};
    int n = epoll_pwait2(worker->epoll, events, 64, &timeout, NULL);
    for (int i = 0; i < n; i++) {
        uint64_t tag = events[i].data.u64;
        if (tag == TAG_SENDER_UDP || tag == TAG_RECEIVER_UDP) while (read_datagrams(worker, tag == TAG_RECEIVER_UDP) == BATCH) {}
        else read_control(worker, &worker->pairs[(tag - TAG_CONTROL) / 2], (int)((tag - TAG_CONTROL) % 2));
    }
}

/// A worker wakes once a tick (1 / its rate, at least 50 µs; 1 ms once the window is over), and
/// with --wake-on-arrival when something arrives: reads what arrived, offers what is due, sends
/// receipt batches whose hold is over. An arrival's time is the kernel's, so a datagram read a
/// tick late has the same latency.
static void *run_worker(void *argument) {
    struct worker *worker = argument;
    double tick = 1 / worker->rate < 50e-6 ? 50e-6 : 1 / worker->rate;
    long offered = 0;
    int next_pair = 0;
    double wake = run_start;
    for (;;) {
        wait_and_read(worker, wake);
        double t = now();
        if (t >= drain_end) break;
        if (t < window_end) {
            long due = (long)((t - run_start) * worker->rate) + 1;
            if (due - offered > 1 && t >= window_start) {
                long lag = (long)((due - offered - 1) / worker->rate * 1e6);
                if (lag > worker->lag_us) worker->lag_us = lag;
            }
            if (due > offered) offer(worker, (int)(due - offered), &next_pair, t >= window_start);
            offered = due > offered ? due : offered;
        }
        wake = t < window_end ? t + tick : t + 1e-3;
        if (wake > drain_end) wake = drain_end;
        for (int i = 0; i < worker->count; i++) {
            struct pair *pair = &worker->pairs[i];
            if (pair->batch_count == 0) continue;
            double deadline = pair->oldest_arrival + options.receipt_delay;
            if (deadline <= t || t >= window_end) send_receipts(worker, pair, t);
            else if (deadline < wake) wake = deadline;
        }
    }
    for (int i = 0; i < worker->count; i++) worker->unresolved += worker->pairs[i].unresolved;
    return NULL;
}

// MARK: Steps, find-max, report

#define MAX_THREADS 64

/// One thread's CPU (utime + stime) of a process.
struct thread_cpu {
    int tid;
    char name[32];
    double seconds;
};

/// Reads the CPU of each thread of `pid` (/proc/PID/task/TID/stat) into `out`; returns how many.
static int threads_cpu(int pid, struct thread_cpu out[MAX_THREADS]) {
    char directory[64];
    snprintf(directory, sizeof directory, "/proc/%d/task", pid);
    DIR *tasks = opendir(directory);
    if (!tasks) return 0;
    int count = 0;
    for (struct dirent *entry; count < MAX_THREADS && (entry = readdir(tasks));) {
        if (entry->d_name[0] == '.') continue;
        char path[320], line[1024];
        snprintf(path, sizeof path, "%s/%s/stat", directory, entry->d_name);
        FILE *file = fopen(path, "r");
        if (!file) continue;
        size_t length = fread(line, 1, sizeof line - 1, file);
        fclose(file);
        line[length] = 0;
        char *open = strchr(line, '('), *close = strrchr(line, ')');
        unsigned long user = 0, system = 0;
        if (!open || !close || sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &user, &system) != 2) continue;
        struct thread_cpu *thread = &out[count++];
        thread->tid = atoi(entry->d_name);
        size_t name_length = (size_t)(close - open - 1) < sizeof thread->name - 1 ? (size_t)(close - open - 1) : sizeof thread->name - 1;
        memcpy(thread->name, open + 1, name_length);
        thread->name[name_length] = 0;
        thread->seconds = (double)(user + system) / sysconf(_SC_CLK_TCK);
    }
    closedir(tasks);
    return count;
}

/// `after`'s threads with what each used since `before` (threads started since count from 0).
static int threads_used(struct thread_cpu *after, int count, const struct thread_cpu *before, int before_count) {
    for (int i = 0; i < count; i++)
        for (int j = 0; j < before_count; j++)
            if (before[j].tid == after[i].tid) after[i].seconds -= before[j].seconds;
    return count;
}

struct step {
    double target, offered_rate, delivered_rate, receipt_rate, relay_cpu, own_cpu, own_system_cpu, receiver_relay_cpu, redis_cpu;
    struct thread_cpu relay_threads[MAX_THREADS];
    int relay_thread_count, cross_loop_pairs;
    long offered, skipped, delivered, receipted, duplicates, unresolved, lag_us, own_wakeups;
    long latency_count;
    double p50, p95, p99, p999, max;
    int sustained;
};


/// System (kernel) CPU time of this process, seconds: on loopback a sender's system time also
/// holds the kernel's work of delivering its datagrams to the relay's socket.
static double own_system_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
}

/// How often this process's threads slept and were woken (voluntary context switches).
static long own_wakeups(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_nvcsw;
}

/// CPU seconds per delivered message of a step, in µs (-1: not measured or nothing delivered).
static double per_message_us(const struct step *step, double cpu) {
    return cpu >= 0 && step->delivered > 0 ? cpu * 1e6 / step->delivered : -1;
}

/// One measurement at `rate` msg/s with fresh connections.
static struct step measure(double rate) {
    static unsigned prefix;
    prefix = prefix ? prefix + 1 : (unsigned)getpid() << 12;
    int workers = options.workers < options.pairs ? options.workers : options.pairs;
    struct worker worker[MAX_WORKERS] = {0};
    struct pair *pairs = calloc((size_t)options.pairs, sizeof *pairs);
    int first = 0;
    for (int w = 0; w < workers; w++) {
        worker[w].count = options.pairs / workers + (w < options.pairs % workers);
        worker[w].pairs = pairs + first;
        worker[w].rate = rate * worker[w].count / options.pairs;
        connect_worker(&worker[w], first, prefix);
        first += worker[w].count;
    }
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    wall_minus_monotonic = wall.tv_sec + wall.tv_nsec / 1e9 - now();
    run_start = now() + 0.02;
    window_start = run_start + options.warmup;
    window_end = window_start + options.seconds;
    drain_end = window_end + 1;
    for (int w = 0; w < workers; w++) pthread_create(&worker[w].thread, NULL, run_worker, &worker[w]);
    // Big (64 threads' names): static, as measure runs on the main thread only.
    static struct step step;
    static struct thread_cpu threads0[MAX_THREADS];
    step = (struct step){.target = rate};
    sleep_until(window_start);
    double relay0 = options.relay_pid ? process_cpu_seconds(options.relay_pid) : -1, own0 = own_cpu_seconds(), system0 = own_system_seconds();
    long wakeups0 = own_wakeups();
    double receiver0 = options.receiver_relay_pid ? process_cpu_seconds(options.receiver_relay_pid) : -1;
    double redis0 = options.redis_pid ? process_cpu_seconds(options.redis_pid) : -1;
    int thread_count0 = options.relay_pid ? threads_cpu(options.relay_pid, threads0) : 0;
    sleep_until(window_end);
    double relay1 = options.relay_pid ? process_cpu_seconds(options.relay_pid) : -1, own1 = own_cpu_seconds(), system1 = own_system_seconds();
    long wakeups1 = own_wakeups();
    double receiver1 = options.receiver_relay_pid ? process_cpu_seconds(options.receiver_relay_pid) : -1;
    double redis1 = options.redis_pid ? process_cpu_seconds(options.redis_pid) : -1;
    if (options.relay_pid)
        step.relay_thread_count = threads_used(step.relay_threads, threads_cpu(options.relay_pid, step.relay_threads), threads0, thread_count0);
    step.receiver_relay_cpu = receiver0 >= 0 && receiver1 >= 0 ? receiver1 - receiver0 : -1;
    step.redis_cpu = redis0 >= 0 && redis1 >= 0 ? redis1 - redis0 : -1;
    float *latencies = NULL;
    for (int w = 0; w < workers; w++) {
        pthread_join(worker[w].thread, NULL);
        step.offered += worker[w].offered, step.skipped += worker[w].skipped, step.delivered += worker[w].delivered;
        step.receipted += worker[w].receipted, step.duplicates += worker[w].duplicates, step.unresolved += worker[w].unresolved;
        if (worker[w].lag_us > step.lag_us) step.lag_us = worker[w].lag_us;
        step.cross_loop_pairs += worker[w].cross_loop_pairs;
        latencies = realloc(latencies, (size_t)(step.latency_count + worker[w].latency_count + 1) * sizeof(float));
        memcpy(latencies + step.latency_count, worker[w].latencies, (size_t)worker[w].latency_count * sizeof(float));
        step.latency_count += worker[w].latency_count;
        free(worker[w].latencies);
        close_worker(&worker[w]);
    }
    free(pairs);
    sort_latencies(latencies, step.latency_count);
    step.p50 = percentile_us(latencies, step.latency_count, 0.5);
    step.p95 = percentile_us(latencies, step.latency_count, 0.95);
    step.p99 = percentile_us(latencies, step.latency_count, 0.99);
    step.p999 = percentile_us(latencies, step.latency_count, 0.999);
    step.max = percentile_us(latencies, step.latency_count, 1);
    free(latencies);
    step.offered_rate = (step.offered - step.skipped) / options.seconds; // sent: skipped offers are not
    step.delivered_rate = step.delivered / options.seconds;
    step.receipt_rate = step.receipted / options.seconds;
    step.relay_cpu = relay0 >= 0 && relay1 >= 0 ? relay1 - relay0 : -1;
    step.own_cpu = own1 - own0;
    step.own_system_cpu = system1 - system0;
    step.own_wakeups = wakeups1 - wakeups0;
    double keep_up = 0.98 * rate;
    step.sustained = step.offered_rate >= keep_up && step.delivered_rate >= keep_up &&
                     step.receipt_rate >= keep_up && step.unresolved == 0 && step.p99 <= options.max_p99_ms * 1000;
    return step;
}

static void usage(FILE *to) {
    fprintf(to,
            "usage: simpload --port P [--host IP] [--pairs N] [--size B] [--rate R] [--seconds S] [--warmup W]\n"
            "                [--window N (1024)] [--workers N (2)] [--receipt-delay-us U] [--relay-pid PID] [--find-max] [--max-p99-ms M]\n"
            "                [--receiver-port P] [--receiver-relay-pid PID] [--redis-pid PID] [--relay-threads N] [--placement any|same|cross]\n"
            "                [--no-wake-on-arrival]\n"
            "SIMP load generator in C against a relay started with --no-login: PAIRS sender -> receiver pairs,\n"
            "R msg/s offered in total (with --find-max, the first rate tried), batch receipts with datagram\n"
            "copies; prints one JSON object (simp-bench's shape: rates, latency_us, relay and own CPU, the\n"
            "relay's CPU per thread).\n"
            "  --receiver-port P   receivers log in to the relay on control port P (same --host), senders to\n"
            "                      --port: with two relays on one Redis every message and receipt crosses\n"
            "                      between them through Redis pub/sub\n"
            "  --receiver-relay-pid PID, --redis-pid PID   also report those processes' CPU in the window\n"
            "  --relay-threads N   the relay runs --threads N: report how many pairs have their two users on\n"
            "                      different loops (a session's loop: its id's low 32 bits modulo N)\n"
            "  --placement same|cross   log each receiver in again until it is on its sender's loop (same)\n"
            "                      or on another (cross); default any: where the kernel put it\n"
            "  --no-wake-on-arrival   each worker thread wakes only once a tick (1 / its rate, at least 50 us)\n"
            "                      and reads what arrived meanwhile; by default arrivals wake it too, so the\n"
            "                      relay's sends wake a waiting client as they would any receiver's. Latency\n"
            "                      is the same either way: send -> the kernel queued the datagram at the receiver\n"
            "find-max prints each step on standard error with the relay's and simpload's CPU per message.\n");
}

static void parse(int argc, char **argv) {
    static struct option long_options[] = {
        {"host", 1, 0, 'h'}, {"port", 1, 0, 'p'}, {"pairs", 1, 0, 'n'}, {"size", 1, 0, 'b'}, {"rate", 1, 0, 'r'},
        {"seconds", 1, 0, 's'}, {"warmup", 1, 0, 'w'}, {"window", 1, 0, 'W'}, {"workers", 1, 0, 'k'},
        {"receipt-delay-us", 1, 0, 'd'}, {"relay-pid", 1, 0, 'P'}, {"find-max", 0, 0, 'f'}, {"max-p99-ms", 1, 0, 'm'},
        {"receiver-port", 1, 0, 'R'}, {"receiver-relay-pid", 1, 0, 'Q'}, {"redis-pid", 1, 0, 'D'}, {"relay-threads", 1, 0, 'T'},
        {"placement", 1, 0, 'L'}, {"wake-on-arrival", 0, 0, 'A'}, {"no-wake-on-arrival", 0, 0, 'N'}, {"help", 0, 0, 'H'},
        {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", long_options, NULL)) != -1;) {
        switch (c) {
        case 'h': options.host = optarg; break;
        case 'p': options.port = atoi(optarg); break;
        case 'n': options.pairs = atoi(optarg); break;
        case 'b': options.size = atoi(optarg); break;
        case 'r': options.rate = atof(optarg); break;
        case 's': options.seconds = atof(optarg); break;
        case 'w': options.warmup = atof(optarg); break;
        case 'W': options.window = atoi(optarg); break;
        case 'k': options.workers = atoi(optarg); break;
        case 'd': options.receipt_delay = atof(optarg) / 1e6; break;
        case 'P': options.relay_pid = atoi(optarg); break;
        case 'f': options.find_max = 1; break;
        case 'm': options.max_p99_ms = atof(optarg); break;
        case 'R': options.receiver_port = atoi(optarg); break;
        case 'Q': options.receiver_relay_pid = atoi(optarg); break;
        case 'D': options.redis_pid = atoi(optarg); break;
        case 'T': options.relay_threads = atoi(optarg); break;
        case 'L':
            options.placement = !strcmp(optarg, "same") ? PLACE_SAME : !strcmp(optarg, "cross") ? PLACE_CROSS : !strcmp(optarg, "any") ? PLACE_ANY : -1;
            break;
        case 'A': options.wake_on_arrival = 1; break;
        case 'N': options.wake_on_arrival = 0; break;
        case 'H': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (options.port < 1 || options.port > 65535 || options.pairs < 1 || options.size < 80 || options.size > 1200 ||
        options.rate <= 0 || options.seconds <= 0 || options.warmup < 0 || options.workers < 1 || options.workers > MAX_WORKERS ||
        options.window < 0 || options.receipt_delay < 0 || options.receiver_port < 0 || options.receiver_port > 65535 ||
        options.relay_threads < 1 || (int)options.placement < 0) {
        fprintf(stderr, "simpload: --port 1-65535 is required; --pairs >= 1, --size 80-1200, --rate > 0, --seconds > 0,\n"
                        "--workers 1-%d, --window >= 0, --receipt-delay-us >= 0, --receiver-port 1-65535, --relay-threads >= 1,\n"
                        "--placement any, same or cross\n", MAX_WORKERS);
        exit(2);
    }
    if (options.placement != PLACE_ANY && options.relay_threads < 2) {
        fprintf(stderr, "simpload: --placement needs --relay-threads N >= 2 (the relay's --threads)\n");
        exit(2);
    }
    if (options.receiver_port == 0) options.receiver_port = options.port;
}

static void print_step(const struct step *step) {
    printf("{\"offered_rate\":%.1f,\"delivered_rate\":%.1f,\"receipt_rate\":%.1f,\"latency_p99_us\":%.0f,\"sustained\":%s,"
           "\"relay_cpu_us_per_message\":%.2f,\"generator_cpu_us_per_message\":%.2f,\"generator_system_cpu_us_per_message\":%.2f}",
           step->offered_rate, step->delivered_rate, step->receipt_rate, step->p99, step->sustained ? "true" : "false",
           per_message_us(step, step->relay_cpu), per_message_us(step, step->own_cpu), per_message_us(step, step->own_system_cpu));
}

/// One line on standard error for a find-max step: what it delivered and who used the CPU.
static void say_step(const struct step *step) {
    fprintf(stderr,
            "simpload: find-max: %.0f msg/s: delivered %.0f, receipted %.0f, p99 %.0f µs, %s; CPU µs/msg: relay %.1f, "
            "simpload %.1f (kernel %.1f)\n",
            step->target, step->delivered_rate, step->receipt_rate, step->p99, step->sustained ? "sustained" : "NOT sustained",
            per_message_us(step, step->relay_cpu), per_message_us(step, step->own_cpu), per_message_us(step, step->own_system_cpu));
}

int main(int argc, char **argv) {
    parse(argc, argv);
    struct step steps[20], best = {0}, report;
    int count = 0, found = 0;
    double low = 0, high = 0, rate = options.rate;
    if (options.find_max) {
        while (count < 20) {
            fprintf(stderr, "simpload: find-max: offering %.0f msg/s\n", rate);
            steps[count] = measure(rate);
            say_step(&steps[count]);
            // One transient (a burst lost in a socket buffer, a late wake-up) must not halve the
            // search: a step that fails is measured once more, and fails only if both runs do.
            if (!steps[count].sustained && count + 1 < 20) {
                fprintf(stderr, "simpload: find-max: %.0f msg/s not sustained; measuring it again\n", rate);
                steps[++count] = measure(rate);
                say_step(&steps[count]);
            }
            if (steps[count].sustained) low = rate, best = steps[count], found = 1;
            else high = rate;
            count++;
            if (high == 0) { rate *= 2; continue; }
            if (high - low <= (0.05 * low > 100 ? 0.05 * low : 100) || count >= 12) break;
            rate = low > 0 ? (low + high) / 2 : high / 2;
        }
        report = found ? best : measure(options.rate);
    } else {
        report = measure(rate);
    }
    printf("{\"tool\":\"simpload\",\"offered_rate\":%.1f,\"delivered_rate\":%.1f,\"receipt_rate\":%.1f,"
           "\"skipped\":%ld,\"duplicates\":%ld,\"unresolved\":%ld,\"failed\":0,\"generator_max_lag_us\":%ld,"
           "\"latency_us\":{\"count\":%ld,\"p50\":%.0f,\"p95\":%.0f,\"p99\":%.0f,\"p999\":%.0f,\"max\":%.0f},"
           "\"bench_cpu_seconds\":%.3f,\"bench_system_cpu_seconds\":%.3f,\"relay_cpu_us_per_message\":%.2f,"
           "\"generator_cpu_us_per_message\":%.2f,\"generator_wakeups_per_message\":%.3f,\"relay\":",
           report.offered_rate, report.delivered_rate, report.receipt_rate, report.skipped, report.duplicates, report.unresolved,
           report.lag_us, report.latency_count, report.p50, report.p95, report.p99, report.p999, report.max, report.own_cpu,
           report.own_system_cpu, per_message_us(&report, report.relay_cpu), per_message_us(&report, report.own_cpu),
           report.delivered > 0 ? (double)report.own_wakeups / report.delivered : -1.0);
    if (report.relay_cpu >= 0) {
        printf("{\"cpu_seconds\":%.3f,\"threads\":[", report.relay_cpu);
        for (int i = 0, shown = 0; i < report.relay_thread_count; i++) {
            if (report.relay_threads[i].seconds < 0.005) continue; // idle threads (NIO's spare loops, timers)
            printf("%s{\"tid\":%d,\"name\":\"%s\",\"cpu_seconds\":%.3f}", shown++ ? "," : "", report.relay_threads[i].tid,
                   report.relay_threads[i].name, report.relay_threads[i].seconds);
        }
        printf("]}");
    } else {
        printf("null");
    }
    printf(",\"receiver_relay\":");
    if (report.receiver_relay_cpu >= 0) printf("{\"cpu_seconds\":%.3f}", report.receiver_relay_cpu);
    else printf("null");
    printf(",\"redis\":");
    if (report.redis_cpu >= 0) printf("{\"cpu_seconds\":%.3f}", report.redis_cpu);
    else printf("null");
    if (options.relay_threads > 1) printf(",\"cross_loop_pairs\":%d", report.cross_loop_pairs);
    static const char *placements[] = {"any", "same", "cross"};
    printf(",\"parameters\":{\"mode\":\"%s\",\"pairs\":%d,\"size\":%d,\"rate\":%.0f,\"duration_s\":%g,\"warmup_s\":%g,"
           "\"loops\":%d,\"window\":%d,\"receipt_delay_us\":%.0f,\"receipt_datagrams\":true,\"datagram_bytes\":%zu,"
           "\"relays\":%d,\"port\":%d,\"receiver_port\":%d,\"relay_threads\":%d,\"placement\":\"%s\",\"wake_on_arrival\":%s}",
           options.find_max ? "find-max" : "rate", options.pairs, options.size, report.target, options.seconds, options.warmup,
           options.workers, options.window, options.receipt_delay * 1e6, datagram_bytes, options.receiver_port == options.port ? 1 : 2,
           options.port, options.receiver_port, options.relay_threads, placements[options.placement],
           options.wake_on_arrival ? "true" : "false");
    if (options.find_max) {
        printf(",\"max_sustained_rate\":%.0f,\"steps\":[", found ? low : 0);
        for (int i = 0; i < count; i++) {
            if (i) printf(",");
            print_step(&steps[i]);
        }
        printf("]");
    }
    printf("}\n");
    return 0;
}
