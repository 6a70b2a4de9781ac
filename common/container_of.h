/* container_of.h - from a pointer to an embedded base back to the struct
 * that embeds it (transports embed gw_transport_t, handles their base). */
#ifndef GW_COMMON_CONTAINER_OF_H
#define GW_COMMON_CONTAINER_OF_H

#include <stddef.h>

#define gw__container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif
