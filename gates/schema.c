/*
 * schema.c - see schema.h.
 */
#include "schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool dim_any(const json_t *d)
{
    return json_is_string(d) || (json_is_integer(d) && json_integer_value(d) < 0) ||
           json_is_null(d);
}

bool gate_shape_compatible(const json_t *a, const json_t *b)
{
    size_t i;

    if (a == NULL || b == NULL || json_is_null(a) || json_is_null(b))
        return true;
    if (!json_is_array(a) || !json_is_array(b) || json_array_size(a) != json_array_size(b))
        return false;
    for (i = 0; i < json_array_size(a); i++) {
        const json_t *x = json_array_get(a, i), *y = json_array_get(b, i);
        if (dim_any(x) || dim_any(y))
            continue;
        if (!json_is_integer(x) || !json_is_integer(y) ||
            json_integer_value(x) != json_integer_value(y))
            return false;
    }
    return true;
}

static const json_t *find(const json_t *list, const char *name)
{
    const json_t *e;
    size_t i;

    json_array_foreach(list, i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && name && strcmp(n, name) == 0)
            return e;
    }
    return NULL;
}

static const char *dtype(const json_t *e)
{
    const char *d = json_string_value(json_object_get(e, "dtype"));

    return d ? d : "";
}

static json_t *side(const json_t *e)
{
    const json_t *shape = json_object_get(e, "shape");

    if (e == NULL)
        return json_null();
    return json_pack("{s:s, s:O}", "dtype", dtype(e), "shape", shape ? shape : json_null());
}

static void add(json_t *diff, const char *kind, const char *name, bool breaking, const json_t *b,
                const json_t *c)
{
    json_array_append_new(diff, json_pack("{s:s, s:s, s:b, s:o, s:o}", "kind", kind, "name",
                                          name ? name : "", "breaking", breaking, "baseline",
                                          side(b), "candidate", side(c)));
}

static void diff_list(json_t *diff, const json_t *base, const json_t *cand, bool inputs)
{
    const char *pfx = inputs ? "input" : "output";
    char kind[32];
    const json_t *e, *other;
    size_t i;

    json_array_foreach(base, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        other = find(cand, name);
        if (other == NULL) {
            snprintf(kind, sizeof(kind), "%s_missing", pfx);
            add(diff, kind, name, true, e, NULL);
            continue;
        }
        if (strcmp(dtype(e), dtype(other)) != 0) {
            snprintf(kind, sizeof(kind), "%s_dtype", pfx);
            add(diff, kind, name, true, e, other);
        } else if (!gate_shape_compatible(json_object_get(e, "shape"),
                                          json_object_get(other, "shape"))) {
            snprintf(kind, sizeof(kind), "%s_shape", pfx);
            add(diff, kind, name, inputs, e, other);
        }
    }
    json_array_foreach(cand, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (find(base, name) != NULL)
            continue;
        snprintf(kind, sizeof(kind), "%s_added", pfx);
        add(diff, kind, name, inputs && !json_is_true(json_object_get(e, "optional")), NULL, e);
    }
}

json_t *gate_schema_diff(const json_t *baseline, const json_t *candidate)
{
    json_t *diff = json_array();

    if (diff == NULL)
        return NULL;
    diff_list(diff, json_object_get(baseline, "inputs"), json_object_get(candidate, "inputs"),
              true);
    diff_list(diff, json_object_get(baseline, "outputs"), json_object_get(candidate, "outputs"),
              false);
    return diff;
}

/* The added input that looks like a rename of `missing` (same dtype, compatible shape). */
static const char *renamed_to(const json_t *diff, const json_t *missing)
{
    const json_t *b = json_object_get(missing, "baseline"), *d, *c;
    size_t i;

    json_array_foreach(diff, i, d)
    {
        if (strcmp(json_string_value(json_object_get(d, "kind")), "input_added") != 0)
            continue;
        c = json_object_get(d, "candidate");
        if (strcmp(dtype(b), dtype(c)) == 0 &&
            gate_shape_compatible(json_object_get(b, "shape"), json_object_get(c, "shape")))
            return json_string_value(json_object_get(d, "name"));
    }
    return NULL;
}

static void shape_text(const json_t *shape, char *out, size_t cap)
{
    char *s = shape && !json_is_null(shape) ? json_dumps(shape, JSON_COMPACT) : NULL;

    snprintf(out, cap, "%s", s ? s : "unknown");
    free(s);
}

bool gate_schema_compatible(const json_t *baseline, const json_t *candidate, char *detail,
                            size_t cap)
{
    json_t *diff = gate_schema_diff(baseline, candidate), *d = NULL, *b, *c;
    char bs[128], cs[128];
    const char *kind, *name, *to;
    size_t i;

    if (cap > 0)
        detail[0] = '\0';
    json_array_foreach(diff, i, d)
    {
        if (json_is_true(json_object_get(d, "breaking")))
            break;
    }
    if (diff == NULL || i == json_array_size(diff)) {
        json_decref(diff);
        return diff != NULL;
    }
    kind = json_string_value(json_object_get(d, "kind"));
    name = json_string_value(json_object_get(d, "name"));
    b = json_object_get(d, "baseline");
    c = json_object_get(d, "candidate");
    if (strcmp(kind, "input_missing") == 0 || strcmp(kind, "output_missing") == 0) {
        to = kind[0] == 'i' ? renamed_to(diff, d) : NULL;
        snprintf(detail, cap, "%s '%.128s' of the baseline is missing from the candidate%s%.128s%s",
                 kind[0] == 'i' ? "input" : "output", name, to ? " (renamed to '" : "",
                 to ? to : "", to ? "'?)" : "");
    } else if (strcmp(kind, "input_added") == 0) {
        snprintf(detail, cap, "the candidate adds the required input '%.128s' (%s)", name,
                 dtype(c));
    } else if (strcmp(kind + strlen(kind) - 5, "dtype") == 0) {
        snprintf(detail, cap, "%s '%.128s' changes dtype from %s to %s",
                 kind[0] == 'i' ? "input" : "output", name, dtype(b), dtype(c));
    } else {
        shape_text(json_object_get(b, "shape"), bs, sizeof(bs));
        shape_text(json_object_get(c, "shape"), cs, sizeof(cs));
        snprintf(detail, cap, "input '%.128s' changes shape from %s to %s", name, bs, cs);
    }
    json_decref(diff);
    return false;
}

json_t *gate_version_schema(const json_t *version)
{
    const json_t *in = json_object_get(version, "introspection");
    const json_t *io = json_object_get(version, "io_schema");

    if (json_is_array(json_object_get(in, "inputs")) ||
        json_is_array(json_object_get(in, "outputs"))) {
        json_t *i = json_object_get(in, "inputs"), *o = json_object_get(in, "outputs");
        return json_pack("{s:o, s:o}", "inputs", i ? json_incref(i) : json_array(), "outputs",
                         o ? json_incref(o) : json_array());
    }
    if (json_is_object(io))
        return json_deep_copy(io);
    return NULL;
}

/* A declared entry against the one read: same dtype, compatible shape. */
static bool entry_agrees(const json_t *decl, const json_t *read, const char *what, char *detail,
                         size_t cap)
{
    const char *name = json_string_value(json_object_get(decl, "name"));

    if (read == NULL) {
        snprintf(detail, cap, "%s '%.128s' is not in the artifact", what, name ? name : "");
        return false;
    }
    if (strcmp(dtype(decl), dtype(read)) != 0) {
        snprintf(detail, cap, "%s '%.128s' is %s in io_schema but %s in the artifact", what,
                 name ? name : "", dtype(decl), dtype(read));
        return false;
    }
    if (!gate_shape_compatible(json_object_get(decl, "shape"), json_object_get(read, "shape"))) {
        char a[128], b[128];
        shape_text(json_object_get(decl, "shape"), a, sizeof(a));
        shape_text(json_object_get(read, "shape"), b, sizeof(b));
        snprintf(detail, cap, "%s '%.128s' has shape %s in io_schema but %s in the artifact", what,
                 name ? name : "", a, b);
        return false;
    }
    return true;
}

bool gate_schema_agree(const json_t *read, const json_t *declared, char *detail, size_t cap)
{
    static const char *const lists[] = {"inputs", "outputs"};
    const json_t *e;
    size_t l, i;

    for (l = 0; l < 2; l++) {
        const json_t *dl = json_object_get(declared, lists[l]),
                     *rl = json_object_get(read, lists[l]);
        const char *what = l == 0 ? "input" : "output";
        json_array_foreach(dl, i, e)
        {
            const char *name = json_string_value(json_object_get(e, "name"));
            if (!entry_agrees(e, find(rl, name), what, detail, cap))
                return false;
        }
        json_array_foreach(rl, i, e)
        {
            const char *name = json_string_value(json_object_get(e, "name"));
            if (find(dl, name) == NULL &&
                !(l == 0 && json_is_true(json_object_get(e, "optional")))) {
                snprintf(detail, cap, "the artifact's %s '%.128s' (%s) is missing from io_schema",
                         what, name ? name : "", dtype(e));
                return false;
            }
        }
    }
    return true;
}
