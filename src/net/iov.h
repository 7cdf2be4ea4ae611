/*
 * A borrowed piece of bytes. A proxy forwards what it received without building it again:
 * a request body with one JSON member cut out is the bytes before the member and the bytes
 * after it, two pieces of the incoming buffer sent back to back (net_client_send).
 */
#ifndef NET_IOV_H
#define NET_IOV_H

#include <stddef.h>

/* len bytes at p, owned by someone else (whoever hands it over says for how long). */
struct net_iov {
    const char *p;
    size_t len;
};

#endif
