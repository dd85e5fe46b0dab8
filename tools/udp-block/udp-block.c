// udp-block: an LD_PRELOAD shim that makes the process's network block UDP while TCP passes,
// as corporate, hotel and some mobile networks do. Every datagram the process sends
// on an IPv4 or IPv6 UDP socket is reported sent and dropped; every datagram that arrives on one
// is read and handed over empty (zero bytes), so none of its content reaches the process. TCP,
// Unix sockets and files are untouched.
//
//   scripts/build-udp-block [OUT]                  # cc -shared -fPIC … -o OUT (default .build/udp-block.so)
//   LD_PRELOAD=$PWD/.build/udp-block.so simp send --to bob hello
//   SIMP_UDP_BLOCK_AFTER_MS=5000 LD_PRELOAD=…     # UDP works for the first 5 s, then is blocked
//
// The clock starts when the shim is loaded (process start). Blocked reads use MSG_DONTWAIT, so a
// read never waits for a datagram that would be emptied anyway.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long block_after_ns = 0;
static long long loaded_at_ns = 0;

static long long monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

__attribute__((constructor)) static void udp_block_start(void) {
    loaded_at_ns = monotonic_ns();
    const char *after = getenv("SIMP_UDP_BLOCK_AFTER_MS");
    if (after && *after) block_after_ns = atoll(after) * 1000000LL;
}

/// Whether `fd` is an IPv4/IPv6 datagram socket and UDP is blocked by now.
static int blocked(int fd) {
    if (monotonic_ns() - loaded_at_ns < block_after_ns) return 0;
    int saved = errno; // getsockopt on a file fails with ENOTSOCK: the caller's errno stays
    int type = 0, domain = 0;
    socklen_t size = sizeof type;
    int udp = getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) == 0 && type == SOCK_DGRAM;
    size = sizeof domain;
    udp = udp && getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &size) == 0 && (domain == AF_INET || domain == AF_INET6);
    errno = saved;
    return udp;
}

#define REAL(name) static __typeof__(name) *real_##name; if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name)

static size_t message_length(const struct msghdr *message) {
    size_t total = 0;
    for (size_t i = 0; i < message->msg_iovlen; i++) total += message->msg_iov[i].iov_len;
    return total;
}

ssize_t sendto(int fd, const void *buffer, size_t length, int flags, const struct sockaddr *to, socklen_t size) {
    REAL(sendto);
    if (blocked(fd)) return (ssize_t)length;
    return real_sendto(fd, buffer, length, flags, to, size);
}

ssize_t send(int fd, const void *buffer, size_t length, int flags) {
    REAL(send);
    if (blocked(fd)) return (ssize_t)length;
    return real_send(fd, buffer, length, flags);
}

ssize_t sendmsg(int fd, const struct msghdr *message, int flags) {
    REAL(sendmsg);
    if (blocked(fd)) return (ssize_t)message_length(message);
    return real_sendmsg(fd, message, flags);
}

int sendmmsg(int fd, struct mmsghdr *messages, unsigned int count, int flags) {
    REAL(sendmmsg);
    if (!blocked(fd)) return real_sendmmsg(fd, messages, count, flags);
    for (unsigned int i = 0; i < count; i++) messages[i].msg_len = (unsigned int)message_length(&messages[i].msg_hdr);
    return (int)count;
}

// A blocked read takes the datagram off the socket and hands the caller an empty one (zero
// bytes, the sender's address kept): its content never reaches the process, yet an event loop
// that was told the socket is readable does read something (SwiftNIO's debug builds assert that
// a readable socket yields a read; answering EAGAIN there crashed `simp listen`).
ssize_t recvfrom(int fd, void *buffer, size_t length, int flags, struct sockaddr *from, socklen_t *size) {
    REAL(recvfrom);
    if (!blocked(fd)) return real_recvfrom(fd, buffer, length, flags, from, size);
    ssize_t taken = real_recvfrom(fd, buffer, length, flags | MSG_DONTWAIT, from, size);
    return taken < 0 ? taken : 0;
}

ssize_t recv(int fd, void *buffer, size_t length, int flags) {
    REAL(recv);
    if (!blocked(fd)) return real_recv(fd, buffer, length, flags);
    ssize_t taken = real_recv(fd, buffer, length, flags | MSG_DONTWAIT);
    return taken < 0 ? taken : 0;
}

ssize_t recvmsg(int fd, struct msghdr *message, int flags) {
    REAL(recvmsg);
    if (!blocked(fd)) return real_recvmsg(fd, message, flags);
    ssize_t taken = real_recvmsg(fd, message, flags | MSG_DONTWAIT);
    return taken < 0 ? taken : 0;
}

int recvmmsg(int fd, struct mmsghdr *messages, unsigned int count, int flags, struct timespec *timeout) {
    REAL(recvmmsg);
    if (!blocked(fd)) return real_recvmmsg(fd, messages, count, flags, timeout);
    int taken = real_recvmmsg(fd, messages, count, flags | MSG_DONTWAIT, timeout);
    for (int i = 0; i < taken; i++) messages[i].msg_len = 0;
    return taken;
}

ssize_t read(int fd, void *buffer, size_t length) {
    REAL(read);
    REAL(recv);
    if (!blocked(fd)) return real_read(fd, buffer, length);
    ssize_t taken = real_recv(fd, buffer, length, MSG_DONTWAIT);
    return taken < 0 ? taken : 0;
}

ssize_t write(int fd, const void *buffer, size_t length) {
    REAL(write);
    if (blocked(fd)) return (ssize_t)length;
    return real_write(fd, buffer, length);
}
