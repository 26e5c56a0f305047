/*
 * fuzz_jinja.c - the chat-template checker (artifact/scan_jinja.c): the Jinja lexer (tags,
 * comments, raw blocks, whitespace control, strings with escapes, balanced braces), the
 * binding pass and the classification of every name; and a GGUF around the template
 * (artifact/scan_formats.c) so the key/value walk that finds it runs too.
 *
 * Checked besides memory safety: the verdict agrees with the findings (clean: none;
 * unsafe: a high one; unknown: a medium one only), every finding's offset is inside the
 * template, and the GGUF carrying the template is never cleaner than the template alone.
 */
#include "fuzz.h"

#include "artifact/scan.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static size_t put_str(uint8_t *o, const char *s, size_t n)
{
    uint64_t len = n;
    size_t i;

    for (i = 0; i < 8; i++)
        o[i] = (uint8_t)(len >> (8 * i));
    memcpy(o + 8, s, n);
    return 8 + n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char key[] = "tokenizer.chat_template";
    struct mg_error err;
    json_t *f = json_array(), *scan = NULL, *e;
    enum art_verdict v;
    bool high = false, medium = false;
    uint8_t *g;
    size_t i, n = 0;

    if (f == NULL || size > (1u << 20))
        goto out;
    v = art_scan_template((const char *)data, size, NULL, f);
    json_array_foreach(f, i, e)
    {
        const char *sev = json_string_value(json_object_get(e, "severity"));
        json_int_t off = json_integer_value(json_object_get(e, "offset"));
        FUZZ_CHECK(sev && json_string_value(json_object_get(e, "detail")), "finding %zu", i);
        FUZZ_CHECK(off >= 0 && (size_t)off <= size, "offset %lld past %zu", (long long)off, size);
        high = high || strcmp(sev, "high") == 0;
        medium = medium || strcmp(sev, "medium") == 0;
    }
    if (json_array_size(f) < ART_SCAN_MAX_FINDINGS) {
        FUZZ_CHECK(v != ART_CLEAN || json_array_size(f) == 0, "clean with findings");
        FUZZ_CHECK(v != ART_UNSAFE || high, "unsafe without a high finding");
        FUZZ_CHECK(v != ART_UNKNOWN || (medium && !high), "unknown with a high or no finding");
    }

    /* GGUF v3: no tensors, one key/value: the template */
    if ((g = malloc(size + 128)) == NULL)
        goto out;
    memcpy(g, "GGUF\x03\x00\x00\x00", 8);
    memset(g + 8, 0, 8);
    memcpy(g + 16, "\x01\x00\x00\x00\x00\x00\x00\x00", 8);
    n = 24 + put_str(g + 24, key, sizeof(key) - 1);
    memcpy(g + n, "\x08\x00\x00\x00", 4);
    n += 4;
    n += put_str(g + n, (const char *)data, size);
    memset(&err, 0, sizeof(err));
    FUZZ_CHECK(art_scan_buffer(g, n, "model.gguf", NULL, &scan, &err) == MG_OK,
               "scan of the GGUF failed: %s", err.message);
    FUZZ_CHECK(art_scan_verdict(scan) >= v, "the GGUF scanned %s, its template %s",
               art_verdict_name(art_scan_verdict(scan)), art_verdict_name(v));
    json_decref(scan);
    free(g);
out:
    json_decref(f);
    return 0;
}
