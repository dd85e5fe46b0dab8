#define _GNU_SOURCE
#include "network_namespace.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int simp_netns_current(void) {
    int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int simp_netns_unshare(void) { return unshare(CLONE_NEWNET) == 0 ? 0 : -errno; }

int simp_netns_enter(int fd) { return setns(fd, CLONE_NEWNET) == 0 ? 0 : -errno; }

int simp_tun_open(const char *name) {
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct ifreq request;
    memset(&request, 0, sizeof request);
    request.ifr_flags = IFF_TUN | IFF_NO_PI;
    strncpy(request.ifr_name, name, IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &request) < 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

static int set_address(int socket_fd, const char *name, unsigned long request_code, uint32_t address) {
    struct ifreq request;
    memset(&request, 0, sizeof request);
    strncpy(request.ifr_name, name, IFNAMSIZ - 1);
    struct sockaddr_in *in = (struct sockaddr_in *)&request.ifr_addr;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(address);
    return ioctl(socket_fd, request_code, &request) < 0 ? -errno : 0;
}

int simp_interface_up(const char *name, uint32_t address, int prefix) {
    int socket_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (socket_fd < 0) return -errno;
    uint32_t mask = prefix <= 0 ? 0 : (uint32_t)(0xffffffffu << (32 - prefix));
    int result = set_address(socket_fd, name, SIOCSIFADDR, address);
    if (result == 0) result = set_address(socket_fd, name, SIOCSIFNETMASK, mask);
    if (result == 0) {
        struct ifreq request;
        memset(&request, 0, sizeof request);
        strncpy(request.ifr_name, name, IFNAMSIZ - 1);
        if (ioctl(socket_fd, SIOCGIFFLAGS, &request) < 0) result = -errno;
        request.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (result == 0 && ioctl(socket_fd, SIOCSIFFLAGS, &request) < 0) result = -errno;
    }
    close(socket_fd);
    return result;
}
