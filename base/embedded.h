/*
 * embedded.h - files compiled into the binary by cmake/embed.cmake.
 */
#ifndef MG_EMBEDDED_H
#define MG_EMBEDDED_H

#include <stddef.h>

struct mg_embedded {
    /* base file name, as in schema/migrations/ or web/ */
    const char *name;
    const unsigned char *data; /* bytes, followed by a NUL */
    size_t len;                /* bytes, without the NUL */
};

#endif
