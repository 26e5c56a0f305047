/*
 * push_int.h - pieces of the push adapters that only the module (and its unit tests) use:
 * pure functions kept out of push.h, which is what the rest of the server calls.
 */
#ifndef PUSH_INT_H
#define PUSH_INT_H

#include <stdbool.h>

#include "push.h"

struct mg_buf;

/*
 * webhook.c: the Standard Webhooks signature of a delivery, "v1,<base64 HMAC-SHA256(key,
 * id "." ts "." body)>", into out (NUL-terminated), with the key push_webhook_key() derives
 * from secret. false when the secret gives no key or memory runs out. Thread-safe.
 */
bool push_webhook_sign(const char *secret, const char *id, const char *ts, const char *body,
                       char out[64]);

/*
 * nginx.c: append the include file for a delivery to b: a comment naming model, alias and
 * generation; for each match rule i a map from $http_<header> to the rule's upstream when
 * the value is exactly the rule's, else to the next rule's variable (rule 0 sets
 * $modelgate_<model>_<alias>, push_nginx_variable, rule i > 0 sets ..._pin<i>); then a
 * split_clients block setting the last default (..._split; without rules the variable
 * itself) to the upstream of each route with a weight above 0 (up_tmpl expanded with its
 * version; the last share is "*"), or to "" when none has; then a split_clients block
 * setting ..._shadow to the shadow's upstream for its percent of requests, else "". false
 * when a name does not fit, a header has no nginx variable (a-z, 0-9 and '-' only), or b's
 * cap is reached (b then holds a partial text).
 */
bool push_nginx_render(const struct store_delivery *d, const char *up_tmpl, struct mg_buf *b);

#endif
