/*
 * test_util.c - common/util.c: the capped buffer, hex and base64, SHA-256,
 * RFC 3339 time, integer and size parsing, and the name/digest/image
 * validators of docs/contract.md ("Conventions").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* ---- mg_buf ------------------------------------------------------------------------------ */

static void test_buf_exactly_max_ok(void **state)
{
    struct mg_buf b;

    (void)state;
    mg_buf_init(&b, 8);
    assert_int_equal(mg_buf_append(&b, "abcdefgh", 8), MG_OK);
    assert_int_equal(b.len, 8);
    assert_memory_equal(b.data, "abcdefgh", 8);
    assert_int_equal(b.data[8], '\0');
    /* Appending nothing to a full buffer is fine. */
    assert_int_equal(mg_buf_append(&b, "", 0), MG_OK);
    assert_int_equal(b.len, 8);
    mg_buf_release(&b);
}

static void test_buf_max_plus_one_appends_nothing(void **state)
{
    struct mg_buf b;

    (void)state;
    mg_buf_init(&b, 8);
    assert_int_equal(mg_buf_append(&b, "abcdefgh", 8), MG_OK);
    assert_int_equal(mg_buf_append(&b, "i", 1), MG_ETOOBIG);
    assert_int_equal(b.len, 8);
    assert_string_equal(b.data, "abcdefgh");
    mg_buf_release(&b);

    /* A chunk that would straddle the cap is refused whole, not truncated. */
    mg_buf_init(&b, 8);
    assert_int_equal(mg_buf_puts(&b, "hello"), MG_OK);
    assert_int_equal(mg_buf_puts(&b, "1234"), MG_ETOOBIG);
    assert_int_equal(b.len, 5);
    assert_string_equal(b.data, "hello");
    assert_int_equal(mg_buf_puts(&b, "123"), MG_OK);
    assert_string_equal(b.data, "hello123");
    mg_buf_release(&b);
}

static void test_buf_too_big_from_empty(void **state)
{
    struct mg_buf b;

    (void)state;
    mg_buf_init(&b, 4);
    assert_int_equal(mg_buf_append(&b, "12345", 5), MG_ETOOBIG);
    assert_int_equal(b.len, 0);
    assert_null(b.data);
    /* A length that would overflow len + n is refused, not wrapped. */
    assert_int_equal(mg_buf_puts(&b, "ab"), MG_OK);
    assert_int_equal(mg_buf_append(&b, "x", SIZE_MAX), MG_ETOOBIG);
    assert_int_equal(mg_buf_append(&b, "x", SIZE_MAX - 1), MG_ETOOBIG);
    assert_int_equal(b.len, 2);
    mg_buf_release(&b);

    mg_buf_init(&b, 0);
    assert_int_equal(mg_buf_append(&b, "x", 1), MG_ETOOBIG);
    assert_int_equal(mg_buf_append(&b, "", 0), MG_OK);
    assert_int_equal(b.len, 0);
    mg_buf_release(&b);
}

static void test_buf_grows_and_is_reusable(void **state)
{
    struct mg_buf b;
    char chunk[100];
    size_t i;

    (void)state;
    mg_buf_init(&b, 10000);
    for (i = 0; i < 50; i++) {
        memset(chunk, 'a' + (int)(i % 26), sizeof(chunk));
        assert_int_equal(mg_buf_append(&b, chunk, sizeof(chunk)), MG_OK);
    }
    assert_int_equal(b.len, 5000);
    assert_true(b.cap > b.len);
    for (i = 0; i < 5000; i++)
        assert_int_equal(b.data[i], 'a' + (int)((i / 100) % 26));
    assert_int_equal(b.data[5000], '\0');
    mg_buf_release(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    /* The cap survives a release. */
    assert_int_equal(b.max, 10000);
    assert_int_equal(mg_buf_puts(&b, "again"), MG_OK);
    assert_string_equal(b.data, "again");
    mg_buf_release(&b);
}

static void test_buf_binary_with_nul(void **state)
{
    struct mg_buf b;
    static const char bin[] = {'a', '\0', 'b', '\0'};

    (void)state;
    mg_buf_init(&b, 64);
    assert_int_equal(mg_buf_append(&b, bin, sizeof(bin)), MG_OK);
    assert_int_equal(b.len, 4);
    assert_memory_equal(b.data, bin, 4);
    assert_int_equal(b.data[4], '\0');
    mg_buf_release(&b);
}

/* ---- hex and SHA-256 --------------------------------------------------------------------- */

static void test_hex_encode(void **state)
{
    static const uint8_t in[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
    char out[2 * sizeof(in) + 1];

    (void)state;
    mg_hex_encode(in, sizeof(in), out);
    assert_string_equal(out, "00017f80abff");
    mg_hex_encode(in, 0, out);
    assert_string_equal(out, "");
}

static void test_hex_decode(void **state)
{
    uint8_t out[4] = {0};
    static const uint8_t want[] = {0x00, 0xab, 0xcd, 0xff};

    (void)state;
    assert_true(mg_hex_decode("00abcdff", 4, out));
    assert_memory_equal(out, want, 4);
    memset(out, 0, sizeof(out));
    assert_true(mg_hex_decode("00ABcDFF", 4, out)); /* either case */
    assert_memory_equal(out, want, 4);
    assert_false(mg_hex_decode("0g", 1, out));
    assert_false(mg_hex_decode("g0", 1, out));
    assert_false(mg_hex_decode(" 1", 1, out));
    assert_false(mg_hex_decode("1\0", 1, out));
    assert_false(mg_hex_decode("x0", 1, out));
    assert_true(mg_hex_decode("", 0, out));
}

static void test_hex_round_trip_all_bytes(void **state)
{
    uint8_t in[256], back[256];
    char hex[513];
    size_t i;

    (void)state;
    for (i = 0; i < 256; i++)
        in[i] = (uint8_t)i;
    mg_hex_encode(in, sizeof(in), hex);
    assert_int_equal(strlen(hex), 512);
    for (i = 0; i < 512; i++)
        assert_true((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f'));
    assert_true(mg_hex_decode(hex, sizeof(back), back));
    assert_memory_equal(in, back, sizeof(in));
}

static void test_sha256_known_vectors(void **state)
{
    char out[65];

    (void)state;
    mg_sha256_hex("", 0, out);
    assert_string_equal(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    mg_sha256_hex("abc", 3, out);
    assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* ---- base64 ------------------------------------------------------------------------------ */

/* RFC 4648 section 10: every padding case (none, one '=', two '='). */
static const struct {
    const char *plain;
    const char *b64;
} b64_vectors[] = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

static void test_base64_rfc4648_vectors(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(b64_vectors) / sizeof(b64_vectors[0]); i++) {
        const char *p = b64_vectors[i].plain;
        char *enc = mg_base64_encode((const uint8_t *)p, strlen(p));
        size_t n = 12345;
        uint8_t *dec;

        assert_non_null(enc);
        assert_string_equal(enc, b64_vectors[i].b64);
        dec = mg_base64_decode(enc, strlen(enc), &n);
        assert_non_null(dec);
        assert_int_equal(n, strlen(p));
        assert_memory_equal(dec, p, n);
        free(dec);
        free(enc);
    }
}

static void test_base64_binary_round_trips(void **state)
{
    uint8_t in[67];
    size_t len, i;

    (void)state;
    for (i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)(i * 37 + (i & 1 ? 0xff : 0x00));
    in[0] = 0x00;
    in[1] = 0xff;
    /* Every length mod 3, including the all-padding ones and lengths > one block. */
    for (len = 0; len <= sizeof(in); len++) {
        char *enc = mg_base64_encode(in, len);
        size_t n = 0, elen;
        uint8_t *dec;

        assert_non_null(enc);
        elen = strlen(enc);
        assert_int_equal(elen, 4 * ((len + 2) / 3));
        assert_int_equal(elen - strcspn(enc, "="), (3 - len % 3) % 3);
        assert_null(strchr(enc, '\n'));
        dec = mg_base64_decode(enc, elen, &n);
        assert_non_null(dec);
        assert_int_equal(n, len);
        if (len)
            assert_memory_equal(dec, in, len);
        free(dec);
        free(enc);
    }
}

static void test_base64_decode_invalid(void **state)
{
    static const char *const bad[] = {
        "Zg",                                /* padding required */
        "Zg=",                               /* length not a multiple of 4 */
        "Zm9vY", "Zm9v!A==", "Zm9*", "Zm-v", /* base64url is not standard base64 */
        "Zm_v",  "Zm\n9",    "Zm 9", "\x80\x81\x82\x83",
    };
    size_t i, n = 777;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t *dec = mg_base64_decode(bad[i], strlen(bad[i]), &n);
        if (dec != NULL)
            fail_msg("mg_base64_decode accepted \"%s\"", bad[i]);
    }
    assert_int_equal(n, 777); /* untouched on failure */
}

/* '=' is only valid as the last one or two characters of the input, and a
 * 4-character group holds at least 2 data characters. */
static void test_base64_decode_rejects_misplaced_padding(void **state)
{
    static const char *const bad[] = {
        "====", "Z===", "Zg=A", "Zg==Zm9v", "Zm8=Zm9v", "Zm9v====",
    };
    size_t i, n, accepted = 0;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t *dec = mg_base64_decode(bad[i], strlen(bad[i]), &n);
        if (dec != NULL) {
            free(dec);
            print_error("mg_base64_decode accepted \"%s\" (out_len %zu)\n", bad[i], n);
            accepted++;
        }
    }
    assert_int_equal(accepted, 0);
}

/* ---- validators -------------------------------------------------------------------------- */

static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);

    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

static void test_valid_names_table(void **state)
{
    static const struct {
        const char *s;
        bool model, alias, gateway;
    } cases[] = {
        {"a", true, true, true},
        {"resnet-50", true, true, true},
        {"bert.base", true, false, false},
        {"a..b", true, false, false},
        {"gw_1", true, false, true},
        {"0abc", true, false, true},
        {"9", true, false, true},
        {"", false, false, false},
        {"Resnet", false, false, false},
        {"UPPER", false, false, false},
        {"resNet", false, false, false},
        {"../x", false, false, false},
        {"..", false, false, false},
        {".", false, false, false},
        {"%2e%2e", false, false, false},
        {"%2E%2E", false, false, false},
        {"a%2fb", false, false, false},
        {"-a", false, false, false},
        {".a", false, false, false},
        {"_a", false, false, false},
        {"a/b", false, false, false},
        {"a b", false, false, false},
        {" a", false, false, false},
        {"a\n", false, false, false},
        {"a+b", false, false, false},
        {"a:b", false, false, false},
        {"caf\xc3\xa9", false, false, false},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *s = cases[i].s;
        size_t n = strlen(s);
        if (mg_valid_model_name(s, n) != cases[i].model)
            fail_msg("mg_valid_model_name(\"%s\") != %d", s, cases[i].model);
        if (mg_valid_alias_name(s, n) != cases[i].alias)
            fail_msg("mg_valid_alias_name(\"%s\") != %d", s, cases[i].alias);
        if (mg_valid_gateway_name(s, n) != cases[i].gateway)
            fail_msg("mg_valid_gateway_name(\"%s\") != %d", s, cases[i].gateway);
    }
}

static void test_valid_names_lengths(void **state)
{
    static const struct {
        size_t len;
        bool model, alias, gateway;
    } cases[] = {
        {31, true, true, true},     {32, true, true, true},  {33, true, false, true},
        {62, true, false, true},    {63, true, false, true}, {64, false, false, false},
        {200, false, false, false},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *s = repeat('a', cases[i].len);
        if (mg_valid_model_name(s, cases[i].len) != cases[i].model)
            fail_msg("model name of %zu chars", cases[i].len);
        if (mg_valid_alias_name(s, cases[i].len) != cases[i].alias)
            fail_msg("alias name of %zu chars", cases[i].len);
        if (mg_valid_gateway_name(s, cases[i].len) != cases[i].gateway)
            fail_msg("gateway name of %zu chars", cases[i].len);
        free(s);
    }
}

static void test_valid_names_length_delimited(void **state)
{
    (void)state;
    /* Only the first n bytes count ... */
    assert_true(mg_valid_model_name("abc/../x", 3));
    assert_false(mg_valid_model_name("abc/../x", 4));
    /* ... and an embedded NUL is not a terminator. */
    assert_false(mg_valid_model_name("ab\0c", 4));
    assert_false(mg_valid_alias_name("ab\0c", 4));
    assert_false(mg_valid_gateway_name("ab\0c", 4));
    assert_false(mg_valid_model_name(NULL, 0));
    assert_false(mg_valid_alias_name(NULL, 3));
    assert_false(mg_valid_gateway_name(NULL, 3));
}

static void test_valid_digest(void **state)
{
    static const struct {
        const char *s;
        bool ok;
    } cases[] = {
        {"sha256:" HEX64, true},
        {"sha256:"
         "0000000000000000000000000000000000000000000000000000000000000000",
         true},
        {"sha256:"
         "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
         false},
        {"sha256:"
         "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeF",
         false},
        {"sha256:"
         "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
         false},
        {"sha256:" HEX64 "0", false},
        {HEX64, false},
        {"sha256" HEX64, false},
        {"sha256:", false},
        {"", false},
        {"SHA256:" HEX64, false},
        {"sha512:" HEX64, false},
        {"sha256:"
         "g123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
         false},
        {"sha256: "
         "123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
         false},
        {"sha256:" HEX64 " ", false},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (mg_valid_digest(cases[i].s, strlen(cases[i].s)) != cases[i].ok)
            fail_msg("mg_valid_digest(\"%s\") != %d", cases[i].s, cases[i].ok);
    }
    /* n delimits: a valid digest followed by more bytes is judged on n. */
    assert_true(mg_valid_digest("sha256:" HEX64 "zz", 71));
    assert_false(mg_valid_digest("sha256:" HEX64, 70));
    assert_false(mg_valid_digest(NULL, 71));
}

static void test_valid_image_ref(void **state)
{
    static const struct {
        const char *s;
        bool ok;
    } cases[] = {
        {"registry.example.com/team/llm:1.2@sha256:" HEX64, true}, /* pinned with tag */
        {"registry.example.com/team/llm@sha256:" HEX64, true},     /* pinned, no tag */
        {"llm@sha256:" HEX64, true},
        {"localhost:5000/llm:v1@sha256:" HEX64, true},
        {"registry.example.com/team/llm:1.2", false}, /* unpinned */
        {"llm", false},
        {"llm:latest", false},
        {"@sha256:" HEX64, false}, /* no repository */
        {"@sha256:", false},
        {"sha256:" HEX64, false},
        {"llm@sha256:", false},
        {"llm@sha256:"
         "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
         false},
        {"llm@sha256:"
         "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
         false},
        {"llm@sha256:" HEX64 "0", false},
        {"llm@sha512:" HEX64, false},
        {" llm@sha256:" HEX64, false}, /* whitespace anywhere */
        {"llm @sha256:" HEX64, false},
        {"l lm@sha256:" HEX64, false},
        {"llm\t@sha256:" HEX64, false},
        {"llm\n@sha256:" HEX64, false},
        {"llm@sha256:" HEX64 " ", false},
        {"llm@sha256:" HEX64 "\n", false},
        {"llm@@sha256:" HEX64, false},
        {"a@b@sha256:" HEX64, false},
        {"llm@sha256:" HEX64 "@sha256:" HEX64, false},
        {":tag@sha256:" HEX64, false},
        {"/llm@sha256:" HEX64, false},
        {"ll\x7fm@sha256:" HEX64, false},
        /* M18 finding 11: the OCI reference grammar, not "anything printable" */
        {"a';$(id)|<>@sha256:" HEX64, false},
        {"registry.example/serve@sha256:" HEX64, true},
        {"ghcr.io/org/serve-api_v2:2024.01-rc1@sha256:" HEX64, true},
        {"reg.example:443/a/b/c@sha256:" HEX64, true},
        {"a__b/c.d-e@sha256:" HEX64, true},
        {"Registry.Example.com/team/llm@sha256:" HEX64, true}, /* domains may be upper case */
        {"registry.example/Team/llm@sha256:" HEX64, false},    /* paths may not */
        {"llm:-tag@sha256:" HEX64, false},                     /* a tag starts with \w */
        {"a//b@sha256:" HEX64, false},                         /* empty component */
        {"a/b/@sha256:" HEX64, false},
        {"a.-b@sha256:" HEX64, false},
        {"a___b@sha256:" HEX64, false},
        {"reg.example:99999999/a@sha256:" HEX64, false},
        {"llm:a$b@sha256:" HEX64, false},
        {"$(id)/llm@sha256:" HEX64, false},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (mg_valid_image_ref(cases[i].s, strlen(cases[i].s)) != cases[i].ok)
            fail_msg("mg_valid_image_ref(\"%s\") != %d", cases[i].s, cases[i].ok);
    }
    assert_false(mg_valid_image_ref(NULL, 80));
}

/* ---- parsing ----------------------------------------------------------------------------- */

static void test_parse_i64(void **state)
{
    static const struct {
        const char *s;
        int64_t min, max;
        bool ok;
        int64_t want;
    } cases[] = {
        {"0", 0, 10, true, 0},
        {"7", 1, INT64_MAX, true, 7},
        {"1000", 1, 1000, true, 1000}, /* bounds are inclusive */
        {"1", 1, 1000, true, 1},
        {"1001", 1, 1000, false, 0},
        {"0", 1, 1000, false, 0},
        {"-5", -10, 10, true, -5},
        {"-11", -10, 10, false, 0},
        {"007", 1, INT64_MAX, false, 0}, /* leading zeros */
        {"00", 0, 10, false, 0},
        {"01", 0, 10, false, 0},
        {"+7", 1, 10, false, 0},
        {"", 0, 10, false, 0},
        {" 7", 0, 10, false, 0},
        {"7 ", 0, 10, false, 0},
        {"7a", 0, 10, false, 0},
        {"a7", 0, 10, false, 0},
        {"1.5", 0, 10, false, 0},
        {"1e3", 0, 10000, false, 0},
        {"0x10", 0, 100, false, 0},
        {"-", -10, 10, false, 0},
        {"9223372036854775807", 0, INT64_MAX, true, INT64_MAX},
        {"9223372036854775808", 0, INT64_MAX, false, 0}, /* overflow */
        {"99999999999999999999", 0, INT64_MAX, false, 0},
        {"-9223372036854775808", INT64_MIN, 0, true, INT64_MIN},
        {"-9223372036854775809", INT64_MIN, 0, false, 0},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = 424242;
        bool ok = mg_parse_i64(cases[i].s, cases[i].min, cases[i].max, &v);
        if (ok != cases[i].ok)
            fail_msg("mg_parse_i64(\"%s\", %lld, %lld) returned %d", cases[i].s,
                     (long long)cases[i].min, (long long)cases[i].max, ok);
        if (ok && v != cases[i].want)
            fail_msg("mg_parse_i64(\"%s\") gave %lld", cases[i].s, (long long)v);
        if (!ok && v != 424242)
            fail_msg("mg_parse_i64(\"%s\") wrote its out-parameter on failure", cases[i].s);
    }
    {
        int64_t v = 1;
        assert_false(mg_parse_i64(NULL, 0, 10, &v));
    }
}

/* "Parse a decimal integer ... from a whole string": no leading whitespace of
 * any kind, and no leading zeros after a sign either. */
static void test_parse_i64_whole_string_only(void **state)
{
    static const char *const bad[] = {"\t7", "\n7", "-007"};
    size_t i, accepted = 0;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t v;
        if (mg_parse_i64(bad[i], -100, 100, &v)) {
            print_error("mg_parse_i64(bad[%zu]) accepted it as %lld\n", i, (long long)v);
            accepted++;
        }
    }
    assert_int_equal(accepted, 0);
}

static void test_parse_size(void **state)
{
    static const struct {
        const char *s;
        bool ok;
        uint64_t want;
    } cases[] = {
        {"0", true, 0},
        {"1048576", true, 1048576},
        {"1K", true, 1024},
        {"1k", true, 1024},
        {"512K", true, 512ull << 10},
        {"2M", true, 2ull << 20},
        {"3G", true, 3ull << 30},
        {"64G", true, 64ull << 30},
        {"4T", true, 4ull << 40},
        {"1KiB", true, 1024},
        {"1MiB", true, 1ull << 20},
        {"2GiB", true, 2ull << 30},
        {"1KB", true, 1024},
        {"18446744073709551615", true, UINT64_MAX},
        {"16777215T", true, 16777215ull << 40},
        {"16777216T", false, 0}, /* 2^64: overflow after the shift */
        {"18446744073709551616", false, 0},
        {"1.5G", false, 0},
        {"1,5G", false, 0},
        {"", false, 0},
        {"G", false, 0},
        {"K1", false, 0},
        {"-1", false, 0},
        {"+1", false, 0},
        {" 1", false, 0},
        {"1 K", false, 0},
        {"1K ", false, 0},
        {"1X", false, 0},
        {"1P", false, 0},
        {"1KiBB", false, 0},
        {"1KK", false, 0},
        {"1e3", false, 0},
        {"0x10", false, 0},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 4242;
        bool ok = mg_parse_size(cases[i].s, &v);
        if (ok != cases[i].ok)
            fail_msg("mg_parse_size(\"%s\") returned %d", cases[i].s, ok);
        if (ok && v != cases[i].want)
            fail_msg("mg_parse_size(\"%s\") gave %llu", cases[i].s, (unsigned long long)v);
    }
    {
        uint64_t v;
        assert_false(mg_parse_size(NULL, &v));
    }
}

/* ---- time -------------------------------------------------------------------------------- */

static void test_time_format(void **state)
{
    static const struct {
        int64_t ms;
        const char *want;
    } cases[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {999, "1970-01-01T00:00:00.999Z"},
        {1000, "1970-01-01T00:00:01.000Z"},
        {1795255200123LL, "2026-11-21T10:00:00.123Z"}, /* docs/contract.md's example */
        {951868799007LL, "2000-02-29T23:59:59.007Z"},  /* leap day */
        {4102444800000LL, "2100-01-01T00:00:00.000Z"}, /* past 2038 */
        {4102444800001LL, "2100-01-01T00:00:00.001Z"}, /* the same second again (kept) */
        {4102444801050LL, "2100-01-01T00:00:01.050Z"}, /* the next one */
        {0, "1970-01-01T00:00:00.000Z"},               /* and back */
    };
    size_t i;
    char out[32];

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(out, 'x', sizeof(out));
        mg_time_format(cases[i].ms, out);
        assert_string_equal(out, cases[i].want);
    }
}

static void test_time_format_before_epoch(void **state)
{
    char out[32];

    (void)state;
    mg_time_format(-1, out);
    assert_string_equal(out, "1969-12-31T23:59:59.999Z");
}

static void test_now_is_sane(void **state)
{
    int64_t a = mg_now_ms(), m1 = mg_mono_ms(), m2;

    (void)state;
    assert_true(a > 1704067200000LL); /* after 2024-01-01 */
    m2 = mg_mono_ms();
    assert_true(m2 >= m1);
}

/* ---- misc -------------------------------------------------------------------------------- */

static void test_ct_equal(void **state)
{
    (void)state;
    assert_true(mg_ct_equal("abcd", "abcd", 4));
    assert_false(mg_ct_equal("abcd", "abce", 4));
    assert_false(mg_ct_equal("xbcd", "abcd", 4));
    assert_true(mg_ct_equal("abcd", "abce", 3));
    assert_true(mg_ct_equal("", "", 0));
}

static void test_random_bytes(void **state)
{
    uint8_t a[32], b[32];

    (void)state;
    assert_true(mg_random_bytes(a, sizeof(a)));
    assert_true(mg_random_bytes(b, sizeof(b)));
    assert_memory_not_equal(a, b, sizeof(a));
    assert_true(mg_random_bytes(a, 0));
}

static void test_fail_and_clear(void **state)
{
    struct mg_error err;
    char big[600];

    (void)state;
    mg_error_clear(&err);
    assert_int_equal(mg_fail(&err, MG_EINVAL, "name", "bad name '%s'", "X"), MG_EINVAL);
    assert_int_equal(err.code, MG_EINVAL);
    assert_string_equal(err.message, "bad name 'X'");
    assert_string_equal(err.field, "name");
    assert_int_equal(mg_fail(&err, MG_ENOTFOUND, NULL, "gone"), MG_ENOTFOUND);
    assert_string_equal(err.field, "");
    assert_int_equal(mg_fail(NULL, MG_ECONFLICT, NULL, "x"), MG_ECONFLICT);
    /* Long messages are truncated, never overflow. */
    memset(big, 'm', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    mg_fail(&err, MG_EIO, NULL, "%s", big);
    assert_int_equal(strlen(err.message), MG_ERR_MSG_MAX - 1);
    mg_error_clear(&err);
    assert_int_equal(err.code, MG_OK);
    assert_string_equal(err.message, "");
    assert_string_equal(err.field, "");
    mg_error_clear(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_exactly_max_ok),
        cmocka_unit_test(test_buf_max_plus_one_appends_nothing),
        cmocka_unit_test(test_buf_too_big_from_empty),
        cmocka_unit_test(test_buf_grows_and_is_reusable),
        cmocka_unit_test(test_buf_binary_with_nul),
        cmocka_unit_test(test_hex_encode),
        cmocka_unit_test(test_hex_decode),
        cmocka_unit_test(test_hex_round_trip_all_bytes),
        cmocka_unit_test(test_sha256_known_vectors),
        cmocka_unit_test(test_base64_rfc4648_vectors),
        cmocka_unit_test(test_base64_binary_round_trips),
        cmocka_unit_test(test_base64_decode_invalid),
        cmocka_unit_test(test_base64_decode_rejects_misplaced_padding),
        cmocka_unit_test(test_valid_names_table),
        cmocka_unit_test(test_valid_names_lengths),
        cmocka_unit_test(test_valid_names_length_delimited),
        cmocka_unit_test(test_valid_digest),
        cmocka_unit_test(test_valid_image_ref),
        cmocka_unit_test(test_parse_i64),
        cmocka_unit_test(test_parse_i64_whole_string_only),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_time_format),
        cmocka_unit_test(test_time_format_before_epoch),
        cmocka_unit_test(test_now_is_sane),
        cmocka_unit_test(test_ct_equal),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_fail_and_clear),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
