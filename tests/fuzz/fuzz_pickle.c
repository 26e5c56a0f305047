/*
 * fuzz_pickle.c - the safety scan's pickle machine (artifact/scan_pickle.c): every opcode of
 * protocols 0-5 with arbitrary arguments, the symbolic stack, marks and memo, the caps, and
 * the file-level dispatch (artifact/scan.c) of the same bytes as a blob named *.pkl and as a
 * blob without a name (sniffing, the protocol 0/1 probe, NumPy headers, archives).
 *
 * Checked besides memory safety:
 * - the verdict is clean, unsafe or unknown, and agrees with the findings: clean has none,
 *   unsafe has a high one, unknown a medium one and no high one (unless findings were
 *   dropped past the cap);
 * - every finding has its member, format, rule (one of art_scan_rules), severity, detail and
 *   an offset inside the input (or, for a member of an archive, not negative);
 * - the file-level report says the same kind of thing: bytes starting with PROTO (and
 *   like no other format) are never cleaner as a file than as a stream.
 */
#include "fuzz.h"

#include "artifact/scan.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void check_findings(const json_t *findings, enum art_verdict v, size_t size, bool dropped)
{
    bool high = false, medium = false;
    const json_t *f;
    size_t i;

    json_array_foreach(findings, i, f)
    {
        const char *sev = json_string_value(json_object_get(f, "severity"));
        const char *rule = json_string_value(json_object_get(f, "rule"));
        json_int_t off = json_integer_value(json_object_get(f, "offset"));

        FUZZ_CHECK(sev && rule && json_string_value(json_object_get(f, "detail")) &&
                       json_string_value(json_object_get(f, "format")) &&
                       json_object_get(f, "member") != NULL,
                   "finding %zu lacks a field", i);
        FUZZ_CHECK(art_scan_rule_index(rule) >= 0, "unknown rule %s", rule);
        /* The input's own offsets lie inside it; a member's (a file inside an archive or a
         * compressed stream) lie inside the member, which may be larger than the input. */
        FUZZ_CHECK(off >= 0 && (!json_is_null(json_object_get(f, "member")) || (size_t)off <= size),
                   "offset %lld past %zu", (long long)off, size);
        high = high || strcmp(sev, "high") == 0;
        medium = medium || strcmp(sev, "medium") == 0;
    }
    FUZZ_CHECK(json_array_size(findings) <= ART_SCAN_MAX_FINDINGS, "%zu findings kept",
               json_array_size(findings));
    if (v == ART_CLEAN)
        FUZZ_CHECK(json_array_size(findings) == 0 && !dropped, "clean with findings");
    if (v == ART_UNSAFE)
        FUZZ_CHECK(high || dropped, "unsafe without a high finding");
    if (v == ART_UNKNOWN)
        FUZZ_CHECK(!high && (medium || dropped), "unknown with a high or no finding");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct art_scan_opts o;
    struct mg_error err;
    json_t *f = json_array(), *scan = NULL;
    enum art_verdict v, file_v;

    if (f == NULL)
        return 0;
    art_scan_opts_default(&o);
    o.max_pickle_stack = 4096; /* small caps: reach them */
    o.max_pickle_memo = 4096;
    o.max_pickle_strings = 65536;
    o.spill = art_scan_spill_tmp; /* in $TMPDIR: run.sh's scratch directory */
    v = art_scan_pickle(data, size, &o, f);
    FUZZ_CHECK(v == ART_CLEAN || v == ART_UNSAFE || v == ART_UNKNOWN, "verdict %d", (int)v);
    check_findings(f, v, size, false);
    json_decref(f);

    memset(&err, 0, sizeof(err));
    FUZZ_CHECK(art_scan_buffer(data, size, "model.pkl", &o, &scan, &err) == MG_OK,
               "scan of model.pkl failed: %s", err.message);
    file_v = art_scan_verdict(scan);
    check_findings(json_object_get(scan, "findings"), file_v, size,
                   json_object_get(scan, "findings_dropped") != NULL);
    /* Bytes that start with PROTO and look like no other format go to the pickle machine. */
    if (size >= 2 && data[0] == 0x80 && data[1] <= 5 && (size < 9 || data[8] != '{') &&
        (size < 262 || memcmp(data + 257, "ustar", 5) != 0))
        FUZZ_CHECK(file_v >= v, "model.pkl scanned %s but the stream %s", art_verdict_name(file_v),
                   art_verdict_name(v));
    json_decref(scan);

    scan = NULL;
    FUZZ_CHECK(art_scan_buffer(data, size, NULL, &o, &scan, &err) == MG_OK,
               "scan of the blob failed: %s", err.message);
    json_decref(scan);
    return 0;
}
