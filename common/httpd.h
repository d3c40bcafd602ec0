/*
 * httpd - small helpers around libmicrohttpd shared by the programs that answer HTTP (ingest,
 * the simulator's channel API) and by the tests' fake channels.
 */
#ifndef PAYCB_HTTPD_H
#define PAYCB_HTTPD_H

#include <stddef.h>

struct MHD_Response;

/*
 * Returns a response that owns a copy of the len bytes at body (body may be NULL when len is 0),
 * or NULL when out of memory. libmicrohttpd 0.9.75 takes the buffer as void * even when it only
 * copies it; copying here keeps the callers' const bodies const without a cast.
 */
struct MHD_Response *httpd_response_copy(const char *body, size_t len);

#endif
