/*
 * fuzz_prom.c - answers of the Prometheus HTTP API (/api/v1/query) through
 * prom_parse_answer(), the parser live canary analysis trusts with a rollout's fate.
 *
 * Input: the first byte picks the HTTP status the answer came with (200, 400, 422, 503 or
 * 500), the rest is the body.
 *
 * Checked besides memory safety:
 * - the sample is one of ok, no data, error;
 * - ok carries a finite number (NaN and ±Inf never pass as data);
 * - an error says why (a non-empty detail), and every detail is a NUL-terminated string;
 * - an answer with a status other than 2xx is never ok.
 */
#include "fuzz.h"

#include <math.h>

#include "control/prom.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long statuses[] = {200, 400, 422, 503, 500};
    struct prom_sample s;
    long status;

    if (size == 0)
        return 0;
    status = statuses[data[0] % 5];
    memset(&s, 0x5a, sizeof(s));
    prom_parse_answer((const char *)data + 1, size - 1, status, &s);
    FUZZ_CHECK(s.state == GATE_SAMPLE_OK || s.state == GATE_SAMPLE_NODATA ||
                   s.state == GATE_SAMPLE_ERROR,
               "state %d", (int)s.state);
    FUZZ_CHECK(memchr(s.detail, '\0', sizeof(s.detail)) != NULL, "detail not terminated");
    FUZZ_CHECK(s.state != GATE_SAMPLE_OK || isfinite(s.value), "ok with %g", s.value);
    FUZZ_CHECK(s.state != GATE_SAMPLE_ERROR || s.detail[0] != '\0', "an error without a detail");
    FUZZ_CHECK(s.state != GATE_SAMPLE_OK || status == 200, "ok from HTTP %ld", status);
    return 0;
}
