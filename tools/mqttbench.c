// mqttbench: the MQTT peer figure for the relay. PAIRS publisher -> broker -> subscriber pairs
// (each client its own TCP connection, topic mqttbench/<pid>/<pair>), SIZE-byte payloads that
// carry their send time, QoS 0/1/2. With --rate 0 the publishers send as fast as their inflight
// windows allow (the broker's delivered rate); with --rate R they offer R messages per second in
// total, spread over the pairs, skipping a pair whose window is full.
//
// After --warmup seconds it measures for --seconds: messages offered, messages that arrived at
// the subscribers (rate), send -> arrival latency percentiles of those, the broker's CPU time
// (/proc/PID/stat of --broker-pid) and this program's own. Prints one JSON object.
//
// Build: cc -O2 -pthread -o mqttbench tools/mqttbench.c -lmosquitto
#define _GNU_SOURCE
#include <getopt.h>
#include <mosquitto.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "benchtime.h"

#define MAX_SAMPLES 8000000

/// One publisher and its subscriber.
struct pair {
    struct mosquitto *publisher, *subscriber;
    char topic[64];
    long sent;              // publishes accepted by libmosquitto (main thread only)
    atomic_long acknowledged; // PUBACK/PUBCOMP seen (publisher's loop thread)
    atomic_int subscribed;
};

static struct {
    int port, pairs, qos, size, inflight, broker_pid;
    double seconds, warmup, rate;
} options = {0, 10, 1, 200, 100, 0, 5, 1, 0};

static atomic_int measuring;        // 1 while the window is open
static atomic_long arrived;         // arrivals inside the window
static float *latencies;            // seconds, one per arrival inside the window

static void on_message(struct mosquitto *client, void *context, const struct mosquitto_message *message) {
    (void)client; (void)context;
    if (!measuring || message->payloadlen < (int)sizeof(double)) return;
    double sent;
    memcpy(&sent, message->payload, sizeof sent);
    long index = arrived++;
    if (index < MAX_SAMPLES) latencies[index] = (float)(now() - sent);
}

static void on_publish(struct mosquitto *client, void *context, int mid) {
    (void)client; (void)mid;
    ((struct pair *)context)->acknowledged++;
}

static void on_subscribe(struct mosquitto *client, void *context, int mid, int count, const int *granted) {
    (void)client; (void)mid; (void)count; (void)granted;
    ((struct pair *)context)->subscribed = 1;
}

static void usage(FILE *to) {
    fprintf(to, "usage: mqttbench --port PORT [--pairs 10] [--qos 1] [--size 200] [--seconds 5] [--warmup 1]\n"
                "                 [--rate 0 (as fast as inflight allows) | MSGS_PER_S] [--inflight 100] [--broker-pid PID]\n");
}

static void parse(int argc, char **argv) {
    static struct option long_options[] = {
        {"port", 1, 0, 'p'}, {"pairs", 1, 0, 'n'}, {"qos", 1, 0, 'q'}, {"size", 1, 0, 's'}, {"seconds", 1, 0, 't'},
        {"warmup", 1, 0, 'w'}, {"rate", 1, 0, 'r'}, {"inflight", 1, 0, 'i'}, {"broker-pid", 1, 0, 'b'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int option;
    while ((option = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        switch (option) {
        case 'p': options.port = atoi(optarg); break;
        case 'n': options.pairs = atoi(optarg); break;
        case 'q': options.qos = atoi(optarg); break;
        case 's': options.size = atoi(optarg); break;
        case 't': options.seconds = atof(optarg); break;
        case 'w': options.warmup = atof(optarg); break;
        case 'r': options.rate = atof(optarg); break;
        case 'i': options.inflight = atoi(optarg); break;
        case 'b': options.broker_pid = atoi(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (options.port <= 0 || options.pairs < 1 || options.qos < 0 || options.qos > 2 || options.size < 16 ||
        options.seconds <= 0 || options.warmup < 0 || options.rate < 0 || options.inflight < 1) {
        usage(stderr);
        exit(2);
    }
}

/// Connects both clients of pair `index` and subscribes; their network loops run in threads.
static void connect_pair(struct pair *pair, int index) {
    char id[64];
    snprintf(pair->topic, sizeof pair->topic, "mqttbench/%d/%d", (int)getpid(), index);
    snprintf(id, sizeof id, "mqttbench-%d-%d-sub", (int)getpid(), index);
    pair->subscriber = mosquitto_new(id, true, pair);
    snprintf(id, sizeof id, "mqttbench-%d-%d-pub", (int)getpid(), index);
    pair->publisher = mosquitto_new(id, true, pair);
    struct mosquitto *clients[2] = {pair->subscriber, pair->publisher};
    for (int i = 0; i < 2; i++) {
        mosquitto_int_option(clients[i], MOSQ_OPT_TCP_NODELAY, 1);
        if (mosquitto_connect(clients[i], "127.0.0.1", options.port, 60) != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "mqttbench: cannot connect to 127.0.0.1:%d\n", options.port);
            exit(1);
        }
    }
    mosquitto_message_callback_set(pair->subscriber, on_message);
    mosquitto_subscribe_callback_set(pair->subscriber, on_subscribe);
    mosquitto_publish_callback_set(pair->publisher, on_publish);
    mosquitto_int_option(pair->publisher, MOSQ_OPT_SEND_MAXIMUM, options.inflight);
    mosquitto_max_inflight_messages_set(pair->publisher, options.inflight);
    mosquitto_subscribe(pair->subscriber, NULL, pair->topic, options.qos);
    mosquitto_loop_start(pair->subscriber);
    mosquitto_loop_start(pair->publisher);
}

/// Publishes one message on `pair` if its inflight window has room; returns whether it did.
static int publish(struct pair *pair, char *payload) {
    if (options.qos > 0 && pair->sent - pair->acknowledged >= options.inflight) return 0;
    double sent = now();
    memcpy(payload, &sent, sizeof sent);
    if (mosquitto_publish(pair->publisher, NULL, pair->topic, options.size, payload, options.qos, false) != MOSQ_ERR_SUCCESS)
        return 0;
    pair->sent++;
    return 1;
}

int main(int argc, char **argv) {
    parse(argc, argv);
    latencies = malloc(sizeof(float) * MAX_SAMPLES);
    char *payload = malloc(options.size);
    memset(payload, 'x', options.size);
    mosquitto_lib_init();
    struct pair *pairs = calloc(options.pairs, sizeof *pairs);
    for (int i = 0; i < options.pairs; i++) connect_pair(&pairs[i], i);
    for (double deadline = now() + 10; ; usleep(10000)) {
        int ready = 0;
        for (int i = 0; i < options.pairs; i++) ready += pairs[i].subscribed;
        if (ready == options.pairs) break;
        if (now() > deadline) { fprintf(stderr, "mqttbench: subscriptions not acknowledged within 10 s\n"); return 1; }
    }
    double start = now(), window_start = start + options.warmup, window_end = window_start + options.seconds;
    double broker0 = 0, own0 = 0;
    long offered = 0, scheduled = 0; // scheduled: due messages published or skipped
    int next = 0;
    for (double t = start; t < window_end; t = now()) {
        if (!measuring && t >= window_start) {
            broker0 = options.broker_pid ? process_cpu_seconds(options.broker_pid) : 0;
            own0 = own_cpu_seconds();
            measuring = 1;
        }
        long due = options.rate > 0 ? (long)((t - start) * options.rate) + 1 : scheduled + options.pairs;
        int progress = 0;
        for (int tried = 0; tried < options.pairs && scheduled < due; tried++) {
            if (publish(&pairs[next], payload)) {
                scheduled++;
                progress = 1;
                if (measuring) offered++;
            }
            next = (next + 1) % options.pairs;
        }
        if (options.rate > 0 && scheduled < due && !progress) scheduled = due; // every window full: skipped, not offered
        if (!progress || (options.rate > 0 && scheduled >= due)) usleep(options.rate > 0 ? 20 : 50);
    }
    double elapsed = now() - window_start;
    double broker_cpu = options.broker_pid ? process_cpu_seconds(options.broker_pid) - broker0 : -1;
    double own_cpu = own_cpu_seconds() - own0;
    long delivered = arrived;
    measuring = 0;
    for (double deadline = now() + 2; now() < deadline; usleep(10000)) {
        long unacknowledged = 0;
        for (int i = 0; i < options.pairs; i++) unacknowledged += pairs[i].sent - pairs[i].acknowledged;
        if (options.qos == 0 || unacknowledged == 0) break;
    }
    long unacknowledged = 0;
    for (int i = 0; i < options.pairs; i++) unacknowledged += options.qos ? pairs[i].sent - pairs[i].acknowledged : 0;
    long samples = delivered < MAX_SAMPLES ? delivered : MAX_SAMPLES;
    sort_latencies(latencies, samples);
#define PERCENTILE(p) percentile_us(latencies, samples, p)
    printf("{\"tool\":\"mqttbench\",\"qos\":%d,\"pairs\":%d,\"size\":%d,\"rate\":%.0f,\"inflight\":%d,\"seconds\":%.3f,"
           "\"offered_rate\":%.0f,\"delivered_rate\":%.0f,\"p50_us\":%.0f,\"p99_us\":%.0f,\"max_us\":%.0f,"
           "\"broker_cpu_seconds\":%.3f,\"broker_cpu_us_per_message\":%.3f,\"bench_cpu_seconds\":%.3f,\"unacknowledged\":%ld}\n",
           options.qos, options.pairs, options.size, options.rate, options.inflight, elapsed, offered / elapsed,
           delivered / elapsed, PERCENTILE(0.5), PERCENTILE(0.99), PERCENTILE(1.0), broker_cpu,
           delivered > 0 && broker_cpu >= 0 ? broker_cpu * 1e6 / delivered : -1, own_cpu, unacknowledged);
    for (int i = 0; i < options.pairs; i++) {
        mosquitto_disconnect(pairs[i].publisher);
        mosquitto_disconnect(pairs[i].subscriber);
        mosquitto_loop_stop(pairs[i].publisher, false);
        mosquitto_loop_stop(pairs[i].subscriber, false);
    }
    mosquitto_lib_cleanup();
    return 0;
}
