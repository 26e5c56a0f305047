/*
 * fuzz_jwt.c - bearer tokens and JWKS documents through identity/jwt.c: id_jwks_parse(),
 * id_jwt_peek_kid(), id_jwt_peek_issuer() and id_jwt_verify() (cjose underneath).
 *
 * Input: either a token alone, verified against a fixed JWKS (one EC P-256 and one RSA key
 * made at start-up), or "TOKEN\nJWKS" whose JWKS part is parsed first and used instead.
 *
 * Checked besides memory safety:
 * - against the fixed keys nothing verifies (the fuzzer holds no private key);
 * - a refusal is MG_EUNAUTH with the check's name in err.field and a message, and the
 *   message never quotes the token: the set of distinct messages stays small, so none is
 *   built from the input (nothing a caller logs can leak it);
 * - a refused verification leaves *claims NULL; a JWKS parse that fails leaves *out NULL.
 */
#include "fuzz.h"

#include <cjose/cjose.h>

#include "identity/jwt.h"

static struct id_jwks *fixed;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const uint8_t e[] = {0x01, 0x00, 0x01};
    cjose_jwk_t *ec, *rsa;
    char *a, *b, *doc = NULL;
    struct mg_error err = {0};
    cjose_err cerr;

    (void)argc;
    (void)argv;
    ec = cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &cerr);
    rsa = cjose_jwk_create_RSA_random(2048, e, sizeof(e), &cerr);
    FUZZ_CHECK(ec && rsa, "cannot make keys");
    cjose_jwk_set_kid(ec, "ec-1", 4, &cerr);
    cjose_jwk_set_kid(rsa, "rsa-1", 5, &cerr);
    a = cjose_jwk_to_json(ec, false, &cerr);
    b = cjose_jwk_to_json(rsa, false, &cerr);
    FUZZ_CHECK(a && b && asprintf(&doc, "{\"keys\":[%s,%s]}", a, b) > 0, "cannot export keys");
    FUZZ_CHECK(id_jwks_parse(doc, strlen(doc), &fixed, &err) == MG_OK && id_jwks_count(fixed) == 2,
               "the fixed JWKS is refused: %s", err.message);
    free(doc);
    cjose_get_dealloc()(a);
    cjose_get_dealloc()(b);
    cjose_jwk_release(ec);
    cjose_jwk_release(rsa);
    return 0;
}

/* Every distinct refusal message seen. Messages are fixed sentences (the expected
 * audience is the only thing printed into one), so a message that depends on the input
 * shows up as an ever-growing set. */
#define MAX_MESSAGES 32
static char seen[MAX_MESSAGES][MG_ERR_MSG_MAX];
static size_t nseen;

static void check_refusal(enum mg_code rc, const struct mg_error *err)
{
    size_t i;

    FUZZ_CHECK(rc == MG_EUNAUTH || rc == MG_ENOMEM, "refused with code %d", (int)rc);
    if (rc != MG_EUNAUTH)
        return;
    FUZZ_CHECK(err->field[0] != '\0' && err->message[0] != '\0',
               "a refusal without a field or message");
    for (i = 0; i < nseen; i++)
        if (strcmp(seen[i], err->message) == 0)
            return;
    FUZZ_CHECK(nseen < MAX_MESSAGES,
               "more than %d distinct refusal messages; the latest, '%s', "
               "depends on the input",
               MAX_MESSAGES, err->message);
    snprintf(seen[nseen++], MG_ERR_MSG_MAX, "%s", err->message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data, *nl = memchr(in, '\n', size);
    size_t tlen = nl ? (size_t)(nl - in) : size;
    struct id_jwks *own = NULL, *keys = fixed;
    struct id_jwt_expect expect = {"https://idp.example", "modelgate", 1800000000, 60};
    struct mg_error err = {0};
    json_t *claims = (json_t *)0x1;
    char *kid = (char *)0x1, *iss = (char *)0x1;
    enum mg_code rc;

    if (nl) {
        rc = id_jwks_parse(nl + 1, size - tlen - 1, &own, &err);
        FUZZ_CHECK((rc == MG_OK) == (own != NULL), "parse result and output disagree");
        if (rc == MG_OK) {
            FUZZ_CHECK(id_jwks_count(own) <= ID_JWKS_MAX_KEYS, "too many keys kept");
            keys = own;
        }
    }
    rc = id_jwt_peek_kid(in, tlen, &kid, &err);
    if (rc == MG_OK)
        free(kid);
    else
        FUZZ_CHECK(kid == NULL, "peek_kid failed but wrote out");
    rc = id_jwt_peek_issuer(in, tlen, &iss, &err);
    if (rc == MG_OK)
        free(iss);
    else
        FUZZ_CHECK(iss == NULL, "peek_issuer failed but wrote out");

    memset(&err, 0, sizeof(err));
    rc = id_jwt_verify(in, tlen, keys, &expect, &claims, &err);
    if (rc == MG_OK) {
        FUZZ_CHECK(keys != fixed, "a fuzzed token verified against keys it cannot hold");
        FUZZ_CHECK(json_is_object(claims), "verified without claims");
        json_decref(claims);
    } else {
        FUZZ_CHECK(claims == NULL, "a refused token left claims");
        check_refusal(rc, &err);
    }
    id_jwks_free(&own);
    return 0;
}
