/*
 * http_int.h - what the files of the HTTP layer (http.c, request.c, authz.c, response.c)
 * share with each other and nobody else.
 */
#ifndef SRV_HTTP_INT_H
#define SRV_HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

struct srv_req;

/* response.c: replace the request's reply (the old one destroyed). */
void srv_set_response(struct srv_req *r, unsigned status, struct MHD_Response *resp,
                      uint64_t bytes);

/* authz.c: authenticate (bearer token or UI session) and authorise the route; on refusal
 * the reply is set and false returned. */
bool srv_check_access(struct srv_req *r);

/* request.c: the request's life. srv_req_begin: first call, before the body: checks the
 * target, method and framing, routes, authorises, prepares the body (false: a reply is
 * set). srv_req_body: a chunk of body. srv_req_finish: the whole body is in: parse and
 * call the handler. */
bool srv_req_begin(struct srv_req *r, const char *method);
void srv_req_body(struct srv_req *r, const char *data, size_t n);
void srv_req_finish(struct srv_req *r);
void srv_req_free(struct srv_req *r);

/* A request refused before its body was read: is the body still coming (drain it)? */
bool srv_req_body_on_its_way(struct srv_req *r);
/* The refused request's connection is not reused (Connection: close on the reply). */
void srv_req_close_after_reply(struct srv_req *r);

#endif
