/*
 * test_output.c - what the CLI prints (client/output.c): aligned tables (NULL cells as "-",
 * long cells cut, many rows), JSON values as short text, digests and byte counts for people,
 * metrics as "k=v" pairs, and --json's pretty JSON.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capture.h"
#include "client/mgc.h"

static char *print_table(const struct mgc_table *t)
{
    struct capture cap;

    capture_begin(&cap, stdout);
    mgc_table_print(t);
    return capture_end(&cap);
}

static void test_table_aligns_columns(void **state)
{
    struct mgc_table t;
    char *out;

    (void)state;
    mgc_table_init(&t, 3);
    mgc_table_row(&t, "VERSION", "ARTIFACT", "AUC");
    mgc_table_row(&t, "1", "sha256:0123", NULL);
    mgc_table_row(&t, "12", "-", "0.95");
    assert_int_equal(t.nrows, 3);
    out = print_table(&t);
    /* every column but the last padded to its widest cell plus two spaces */
    assert_string_equal(out, "VERSION  ARTIFACT     AUC\n"
                             "1        sha256:0123  -\n"
                             "12       -            0.95\n");
    free(out);
    mgc_table_release(&t);
    assert_null(t.cells);
    assert_int_equal(t.nrows, 0);

    /* an empty table prints nothing */
    mgc_table_init(&t, 2);
    out = print_table(&t);
    assert_string_equal(out, "");
    free(out);
    mgc_table_release(&t);
}

static void test_table_cuts_long_cells_and_grows(void **state)
{
    char long_cell[301], want[205], num[16];
    struct mgc_table t;
    char *out;

    (void)state;
    memset(long_cell, 'x', 300);
    long_cell[300] = '\0';
    mgc_table_init(&t, 2);
    mgc_table_row(&t, "A", long_cell);
    assert_int_equal(strlen(t.cells[1]), 203);
    memset(want, 'x', 200);
    memcpy(want + 200, "...", 4);
    assert_string_equal(t.cells[1], want);
    /* past the first allocation (16 rows) and its doubling */
    for (int i = 0; i < 40; i++) {
        snprintf(num, sizeof(num), "%d", i);
        mgc_table_row(&t, num, "v");
    }
    assert_int_equal(t.nrows, 41);
    assert_string_equal(t.cells[2 * 40], "39");
    assert_string_equal(t.cells[2 * 17], "16");
    out = print_table(&t);
    /* the first column is as wide as "39"; every line is there */
    assert_non_null(strstr(out, "\n0   v\n"));
    assert_non_null(strstr(out, "\n39  v\n"));
    free(out);
    mgc_table_release(&t);
}

static void test_text_of_json_values(void **state)
{
    static const struct {
        const char *json; /* NULL: a missing value */
        const char *text;
    } cases[] = {
        {NULL, "-"},
        {"null", "-"},
        {"[]", "-"},
        {"{}", "-"},
        {"\"ready\"", "ready"},
        {"\"\"", ""},
        {"42", "42"},
        {"-7", "-7"},
        {"9007199254740993", "9007199254740993"},
        {"0.5", "0.5"},
        {"0.942", "0.942"},
        {"1234567.89", "1234567.89"}, /* the value, not a rounding of it */
        {"0.94199999999999995", "0.942"},
        {"0.30000000000000004", "0.30000000000000004"},
        {"1e-07", "1e-07"},
        {"true", "true"},
        {"false", "false"},
        {"[1,\"a\"]", "[1,\"a\"]"},
        {"{\"a\":{\"b\":1}}", "{\"a\":{\"b\":1}}"},
        {"{\"auc\":0.942,\"p\":[0.1,2.5]}", "{\"auc\":0.942,\"p\":[0.1,2.5]}"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *v = cases[i].json ? json_loads(cases[i].json, JSON_DECODE_ANY, NULL) : NULL;
        char *t;

        if (cases[i].json)
            assert_non_null(v);
        t = mgc_text(v);
        assert_non_null(t);
        assert_string_equal(t, cases[i].text);
        free(t);
        json_decref(v);
    }
}

static void test_str_member(void **state)
{
    json_t *o = json_pack("{s:s, s:i, s:n}", "name", "fraud", "n", 3, "z");

    (void)state;
    assert_non_null(o);
    assert_string_equal(mgc_str(o, "name", "?"), "fraud");
    assert_string_equal(mgc_str(o, "n", "?"), "?");       /* not a string */
    assert_string_equal(mgc_str(o, "z", "?"), "?");       /* null */
    assert_string_equal(mgc_str(o, "missing", "?"), "?"); /* absent */
    assert_null(mgc_str(o, "missing", NULL));
    assert_string_equal(mgc_str(NULL, "name", "?"), "?");
    json_decref(o);
}

static void test_short_digest(void **state)
{
    static const char *const cases[][2] = {
        {"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
         "sha256:0123456789ab"},
        {"sha256:01", "sha256:01"},
        {"", ""},
    };
    char out[24];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mgc_short_digest(cases[i][0], out);
        assert_string_equal(out, cases[i][1]);
    }
    mgc_short_digest(NULL, out);
    assert_string_equal(out, "-");
}

static void test_human_bytes(void **state)
{
    static const struct {
        double n;
        const char *text;
    } cases[] = {
        {0, "0 B"},
        {1, "1 B"},
        {1023, "1023 B"},
        {1024, "1.0 KiB"},
        {1536, "1.5 KiB"},
        {1.5 * 1048576, "1.5 MiB"},
        {2.5 * 1073741824.0, "2.5 GiB"},
        {1099511627776.0, "1.0 TiB"},
        {1125899906842624.0, "1.0 PiB"},
        {1125899906842624.0 * 2048, "2048.0 PiB"}, /* no unit past PiB */
    };
    char out[32];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mgc_human_bytes(cases[i].n, out);
        assert_string_equal(out, cases[i].text);
    }
}

static void test_metrics_text(void **state)
{
    static const char *const cases[][2] = {
        {"{\"auc\": 0.942, \"p95\": 41.5}", "auc=0.942 p95=41.5"},
        {"{\"n\": 3, \"ok\": true, \"note\": \"x\"}", "n=3 ok=true note=x"},
        {"{\"nested\": {\"a\": 1}, \"none\": null}", "nested={\"a\":1} none=-"},
        {"{}", "-"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *m = json_loads(cases[i][0], 0, NULL);
        char *t;

        assert_non_null(m);
        t = mgc_metrics_text(m);
        assert_non_null(t);
        assert_string_equal(t, cases[i][1]);
        free(t);
        json_decref(m);
    }
}

static void test_print_json(void **state)
{
    json_t *v = json_pack("{s:i, s:[s]}", "version", 3, "tags", "x");
    json_t *s = json_string("plain");
    struct capture cap;
    char *out;
    int rc;

    (void)state;
    capture_begin(&cap, stdout);
    rc = mgc_print_json(v);
    out = capture_end(&cap);
    assert_int_equal(rc, MGC_OK);
    assert_string_equal(out, "{\n  \"version\": 3,\n  \"tags\": [\n    \"x\"\n  ]\n}\n");
    free(out);
    /* not only objects: a bare string is valid JSON too */
    capture_begin(&cap, stdout);
    rc = mgc_print_json(s);
    out = capture_end(&cap);
    assert_int_equal(rc, MGC_OK);
    assert_string_equal(out, "\"plain\"\n");
    free(out);
    json_decref(v);
    json_decref(s);
    /* reals: the shortest text that reads back the same, never 17 digits */
    v = json_pack("{s:f, s:f}", "auc", 0.942, "sum", 0.1 + 0.2);
    capture_begin(&cap, stdout);
    rc = mgc_print_json(v);
    out = capture_end(&cap);
    assert_int_equal(rc, MGC_OK);
    assert_string_equal(out, "{\n  \"auc\": 0.942,\n  \"sum\": 0.30000000000000004\n}\n");
    free(out);
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_aligns_columns),
        cmocka_unit_test(test_table_cuts_long_cells_and_grows),
        cmocka_unit_test(test_text_of_json_values),
        cmocka_unit_test(test_str_member),
        cmocka_unit_test(test_short_digest),
        cmocka_unit_test(test_human_bytes),
        cmocka_unit_test(test_metrics_text),
        cmocka_unit_test(test_print_json),
    };

    return cmocka_run_group_tests_name("unit_client_output", tests, NULL, NULL);
}
