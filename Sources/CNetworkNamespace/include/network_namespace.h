#ifndef SIMP_NETWORK_NAMESPACE_H
#define SIMP_NETWORK_NAMESPACE_H

#include <stdint.h>

/// The calling thread's network namespace, as a file descriptor to go back to with
/// `simp_netns_enter`; -errno on failure.
int simp_netns_current(void);

/// Moves the calling thread (only it) into a new, empty network namespace; 0 or -errno.
/// The namespace lives while a socket or TUN device made in it is open.
int simp_netns_unshare(void);

/// Moves the calling thread into the namespace `fd` names (from `simp_netns_current`); 0 or -errno.
int simp_netns_enter(int fd);

/// Makes a TUN device (IP packets, no extra header) named `name` in the calling thread's network
/// namespace and returns its file descriptor; -errno on failure.
int simp_tun_open(const char *name);

/// Gives the interface `name` the IPv4 address `address` (host byte order) with a `prefix`-bit
/// netmask, and brings it up; 0 or -errno.
int simp_interface_up(const char *name, uint32_t address, int prefix);

#endif
