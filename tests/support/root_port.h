/*
 * root_port.h - the loopback port a test's forked ranks meet at (GW_ROOT),
 * for the harnesses that fork ranks themselves (forked_ranks.h,
 * device_ranks.h). Header-only.
 */
#ifndef GW_TESTS_ROOT_PORT_H
#define GW_TESTS_ROOT_PORT_H

#include <stdio.h>
#include <unistd.h>

/* The root's port for a run. Ports from the kernel's ephemeral range
 * (net.ipv4.ip_local_port_range) are handed to every connect and every
 * bind to port 0, the data planes' included, so a port picked there was
 * sometimes taken between the pick and rank 0's bind ("Address already in
 * use", and the job failed after the join timeout). The pick is above
 * that range where there is room, and a taken port is retried (forked_ranks.h). */
static inline int test_root_port(int round)
{
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            hi = 60999;
        fclose(f);
    }
    unsigned mix = (unsigned)getpid() * 7u + 131u * (unsigned)round;
    if (hi <= 64511) /* at least 1,024 ports above the range */
        return hi + 1 + (int)(mix % (unsigned)(65535 - hi));
    return 20000 + (int)(mix % 10000u); /* no room above: below it */
}

#endif
