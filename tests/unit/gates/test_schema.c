/*
 * test_schema.c - gates/schema.c and the "schema" gate of gates/policy.c: tables of
 * baseline/candidate schemas and what the gate says about them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "gates/policy.h"
#include "gates/schema.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static json_t *load(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);

    if (j == NULL)
        fail_msg("bad test JSON '%s': %s", s, e.text);
    return j;
}

#define BASE                                                                                       \
    "{\"inputs\":[{\"name\":\"image\",\"dtype\":\"F32\",\"shape\":[\"batch\",3,224,224]},"         \
    "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]}],"                                     \
    "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[\"batch\",1000]}]}"

static void test_compatibility_table(void **state)
{
    static const struct {
        const char *what, *candidate;
        bool ok;
        const char *detail; /* a substring of the detail when not ok */
    } cases[] = {
        {"identical", BASE, true, NULL},
        {"renamed input",
         "{\"inputs\":[{\"name\":\"pixels\",\"dtype\":\"F32\",\"shape\":[\"batch\",3,224,224]},"
         "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[\"batch\",1000]}]}",
         false,
         "input 'image' of the baseline is missing from the candidate (renamed to 'pixels'?)"},
        {"dtype change",
         "{\"inputs\":[{\"name\":\"image\",\"dtype\":\"F16\",\"shape\":[\"batch\",3,224,224]},"
         "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[\"batch\",1000]}]}",
         false, "input 'image' changes dtype from F32 to F16"},
        {"new required input",
         "{\"inputs\":[{\"name\":\"image\",\"dtype\":\"F32\",\"shape\":[\"batch\",3,224,224]},"
         "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]},"
         "{\"name\":\"scale\",\"dtype\":\"F32\",\"shape\":[1]}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[\"batch\",1000]}]}",
         false, "adds the required input 'scale'"},
        {"new optional input",
         "{\"inputs\":[{\"name\":\"image\",\"dtype\":\"F32\",\"shape\":[\"batch\",3,224,224]},"
         "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]},"
         "{\"name\":\"scale\",\"dtype\":\"F32\",\"shape\":[1],\"optional\":true}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[\"batch\",1000]}]}",
         true, NULL},
        {"removed output",
         "{\"inputs\":[{\"name\":\"image\",\"dtype\":\"F32\",\"shape\":[\"batch\",3,224,224]},"
         "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]}],\"outputs\":[]}",
         false, "output 'logits' of the baseline is missing from the candidate"},
        {"output dtype change",
         "{\"inputs\":[{\"name\":\"image\",\"dtype\":\"F32\",\"shape\":[\"batch\",3,224,224]},"
         "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F16\",\"shape\":[\"batch\",1000]}]}",
         false, "output 'logits' changes dtype from F32 to F16"},
        {"extra optional output",
         "{\"inputs\":[{\"name\":\"image\",\"dtype\":\"F32\",\"shape\":[\"batch\",3,224,224]},"
         "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[\"batch\",1000]},"
         "{\"name\":\"probs\",\"dtype\":\"F32\",\"shape\":[\"batch\",1000]}]}",
         true, NULL},
        {"symbolic and -1 dimensions match anything",
         "{\"inputs\":[{\"name\":\"image\",\"dtype\":\"F32\",\"shape\":[8,3,\"h\",-1]},"
         "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[\"n\",8]}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[\"b\",1000]}]}",
         true, NULL},
        {"fixed dimension changed",
         "{\"inputs\":[{\"name\":\"image\",\"dtype\":\"F32\",\"shape\":[\"batch\",3,256,256]},"
         "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[\"batch\",1000]}]}",
         false, "input 'image' changes shape from [\"batch\",3,224,224] to [\"batch\",3,256,256]"},
        {"rank changed",
         "{\"inputs\":[{\"name\":\"image\",\"dtype\":\"F32\",\"shape\":[\"batch\",150528]},"
         "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[\"batch\",1000]}]}",
         false, "changes shape"},
        {"unknown rank matches anything",
         "{\"inputs\":[{\"name\":\"image\",\"dtype\":\"F32\",\"shape\":null},"
         "{\"name\":\"mask\",\"dtype\":\"I64\"}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[7]}]}",
         true, NULL},
        {"input order does not matter",
         "{\"inputs\":[{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]},"
         "{\"name\":\"image\",\"dtype\":\"F32\",\"shape\":[\"batch\",3,224,224]}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[\"batch\",1000]}]}",
         true, NULL},
    };
    json_t *base = load(BASE), *cand;
    char detail[400];
    size_t i;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        cand = load(cases[i].candidate);
        bool ok = gate_schema_compatible(base, cand, detail, sizeof(detail));
        if (ok != cases[i].ok)
            fail_msg("%s: compatible %d, expected %d (%s)", cases[i].what, ok, cases[i].ok, detail);
        if (!ok && strstr(detail, cases[i].detail) == NULL)
            fail_msg("%s: detail '%s' lacks '%s'", cases[i].what, detail, cases[i].detail);
        json_decref(cand);
    }
    json_decref(base);
}

static void test_shape_table(void **state)
{
    static const struct {
        const char *a, *b;
        bool ok;
    } cases[] = {
        {"[1,2,3]", "[1,2,3]", true}, {"[1,2,3]", "[1,2,4]", false},
        {"[1,2]", "[1,2,3]", false},  {"[-1,2]", "[5,2]", true},
        {"[\"n\",2]", "[5,2]", true}, {"[\"n\",2]", "[\"m\",3]", false},
        {"null", "[1]", true},        {"[]", "[]", true},
        {"[]", "[1]", false},         {"[null]", "[3]", true},
    };
    size_t i;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        json_t *b = json_loads(cases[i].b, JSON_DECODE_ANY, NULL);
        json_t *aa = json_loads(cases[i].a, JSON_DECODE_ANY, NULL);
        if (gate_shape_compatible(aa, b) != cases[i].ok ||
            gate_shape_compatible(b, aa) != cases[i].ok)
            fail_msg("%s vs %s", cases[i].a, cases[i].b);
        json_decref(aa);
        json_decref(b);
    }
}

static void test_diff_kinds(void **state)
{
    json_t *base = load(BASE);
    json_t *cand =
        load("{\"inputs\":[{\"name\":\"pixels\",\"dtype\":\"F32\",\"shape\":[\"batch\",3,224,224]},"
             "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]},"
             "{\"name\":\"t\",\"dtype\":\"F32\",\"shape\":[1],\"optional\":true}],"
             "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[\"batch\",10]},"
             "{\"name\":\"probs\",\"dtype\":\"F32\",\"shape\":[\"batch\",1000]}]}");
    static const struct {
        const char *kind, *name;
        bool breaking;
    } want[] = {{"input_missing", "image", true},
                {"input_added", "pixels", true},
                {"input_added", "t", false},
                {"output_shape", "logits", false},
                {"output_added", "probs", false}};
    json_t *d = gate_schema_diff(base, cand), *e;
    size_t i;

    (void)state;
    assert_int_equal(json_array_size(d), N_ELEMS(want));
    for (i = 0; i < N_ELEMS(want); i++) {
        e = json_array_get(d, i);
        assert_string_equal(json_string_value(json_object_get(e, "kind")), want[i].kind);
        assert_string_equal(json_string_value(json_object_get(e, "name")), want[i].name);
        assert_int_equal(json_is_true(json_object_get(e, "breaking")), want[i].breaking);
    }
    json_decref(d);
    json_decref(base);
    json_decref(cand);
}

static void test_version_schema(void **state)
{
    json_t *v = load("{\"introspection\":{\"format\":\"onnx\",\"inputs\":[{\"name\":\"a\"}],"
                     "\"outputs\":[]},\"io_schema\":{\"inputs\":[],\"outputs\":[]}}");
    json_t *s = gate_version_schema(v);

    (void)state;
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(s, "inputs"), 0), "name")),
        "a");
    json_decref(s);
    json_object_del(json_object_get(v, "introspection"), "inputs");
    json_object_del(json_object_get(v, "introspection"), "outputs");
    s = gate_version_schema(v);
    assert_int_equal(json_array_size(json_object_get(s, "inputs")), 0);
    json_decref(s);
    json_object_del(v, "io_schema");
    assert_null(gate_version_schema(v));
    json_decref(v);
}

/* The gate inside gate_evaluate(): status, detail and diff per situation. */
static void test_gate_table(void **state)
{
    static const struct {
        const char *what;
        int64_t baseline;
        const char *base, *cand;
        const char *status, *detail;
    } cases[] = {
        {"no baseline", 0, NULL, BASE, "passed", "no baseline"},
        {"baseline without schema", 3, NULL, BASE, "passed", "baseline has no"},
        {"candidate without schema", 3, BASE, NULL, "failed", "declare io_schema"},
        {"compatible", 3, BASE, BASE, "passed", NULL},
        {"renamed", 3, BASE,
         "{\"inputs\":[{\"name\":\"pixels\",\"dtype\":\"F32\",\"shape\":[1,3,224,224]},"
         "{\"name\":\"mask\",\"dtype\":\"I64\",\"shape\":[-1,8]}],"
         "\"outputs\":[{\"name\":\"logits\",\"dtype\":\"F32\",\"shape\":[1,1000]}]}",
         "failed", "input 'image'"},
    };
    struct gate_policy p;
    struct gate_input in;
    json_t *report, *g, *b, *c;
    size_t i;

    (void)state;
    gate_policy_empty(&p);
    p.schema_compatible = true;
    for (i = 0; i < N_ELEMS(cases); i++) {
        memset(&in, 0, sizeof(in));
        in.policy = &p;
        in.baseline_version = cases[i].baseline;
        b = cases[i].base ? load(cases[i].base) : NULL;
        c = cases[i].cand ? load(cases[i].cand) : NULL;
        in.baseline_schema = b;
        in.candidate_schema = c;
        report = gate_evaluate(&in, false);
        g = json_array_get(json_object_get(report, "gates"), 0);
        assert_string_equal(json_string_value(json_object_get(g, "kind")), "schema");
        if (strcmp(json_string_value(json_object_get(g, "status")), cases[i].status) != 0)
            fail_msg("%s: %s", cases[i].what, json_string_value(json_object_get(g, "status")));
        if (cases[i].detail &&
            strstr(json_string_value(json_object_get(g, "detail")), cases[i].detail) == NULL)
            fail_msg("%s: detail '%s'", cases[i].what,
                     json_string_value(json_object_get(g, "detail")));
        assert_int_equal(json_is_true(json_object_get(report, "passed")),
                         strcmp(cases[i].status, "passed") == 0);
        json_decref(report);
        json_decref(b);
        json_decref(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compatibility_table), cmocka_unit_test(test_shape_table),
        cmocka_unit_test(test_diff_kinds),          cmocka_unit_test(test_version_schema),
        cmocka_unit_test(test_gate_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
