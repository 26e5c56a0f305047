/*
 * onnx.c - an ONNX model's graph: the structure onnx_filter.c kept is decoded by
 * libprotobuf-c (onnx.pb-c.h, generated at build time from Debian's onnx.proto) with an
 * allocator capped at max_onnx_memory, then summarised: graph inputs and outputs (name,
 * dtype, shape), initializer counts, dtypes and bytes, the opset imports and the producer.
 */
#include "onnx_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_int.h"
#include "dtype.h"
#include "introspect.h"

#define TYPE_TEXT 512
#define PROPS_MAX 64

/* ---- a capped allocator for protobuf-c ---------------------------------------------- */

struct pb_budget {
    uint64_t used, cap;
    bool over;
};

static void *pb_alloc(void *data, size_t size)
{
    struct pb_budget *b = data;
    size_t *p;

    if (size > b->cap - b->used || size > SIZE_MAX - sizeof(size_t) * 2) {
        b->over = true;
        return NULL;
    }
    if ((p = malloc(size + sizeof(size_t) * 2)) == NULL)
        return NULL;
    p[0] = size;
    b->used += size;
    return p + 2;
}

static void pb_free(void *data, void *ptr)
{
    struct pb_budget *b = data;
    size_t *p = ptr;

    if (p == NULL)
        return;
    p -= 2;
    b->used -= p[0];
    free(p);
}

/* ---- types and shapes ------------------------------------------------------------------ */

static const char *elem_name(int32_t t)
{
    const char *n = art_onnx_dtype_name(t);

    return n ? n : "UNDEFINED";
}

static bool put(char *buf, size_t *o, const char *s)
{
    size_t n = strlen(s);

    if (*o + n >= TYPE_TEXT)
        return false;
    memcpy(buf + *o, s, n + 1);
    *o += n;
    return true;
}

/* "F32", "seq(F32)", "map(I64,F32)", "optional(seq(F32))", "sparse(F32)" or "UNDEFINED". */
static bool type_text(const Onnx__TypeProto *t, char *buf, size_t *o)
{
    if (t == NULL)
        return put(buf, o, "UNDEFINED");
    switch (t->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        return put(buf, o, elem_name(t->tensor_type->elem_type));
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        return put(buf, o, "sparse(") && put(buf, o, elem_name(t->sparse_tensor_type->elem_type)) &&
               put(buf, o, ")");
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        return put(buf, o, "seq(") && type_text(t->sequence_type->elem_type, buf, o) &&
               put(buf, o, ")");
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        return put(buf, o, "optional(") && type_text(t->optional_type->elem_type, buf, o) &&
               put(buf, o, ")");
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        return put(buf, o, "map(") && put(buf, o, elem_name(t->map_type->key_type)) &&
               put(buf, o, ",") && type_text(t->map_type->value_type, buf, o) && put(buf, o, ")");
    default:
        return put(buf, o, "UNDEFINED");
    }
}

/* [1, "batch", -1] (-1: a dimension without value or name), or null without a shape. */
static json_t *shape_json(const Onnx__TypeProto *t)
{
    const Onnx__TensorShapeProto *sh = NULL;
    json_t *a;
    size_t i;

    if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        sh = t->tensor_type->shape;
    else if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE)
        sh = t->sparse_tensor_type->shape;
    if (sh == NULL)
        return json_null();
    a = json_array();
    for (i = 0; a && i < sh->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            json_array_append_new(a, json_integer(d->dim_value));
        else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            json_array_append_new(a, json_string(d->dim_param ? d->dim_param : ""));
        else
            json_array_append_new(a, json_integer(-1));
    }
    return a;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static const char *str(const char *s)
{
    return s ? s : "";
}

/* Inputs or outputs as [{"name","dtype","shape"[,"optional"]}]. */
static enum mg_code io_list(struct art_src *s, Onnx__ValueInfoProto **v, size_t n,
                            const char **inits, size_t ninits, bool inputs, json_t **out,
                            struct mg_error *err)
{
    char type[TYPE_TEXT];
    json_t *arr = json_array(), *e;
    const char *name;
    size_t i, o;
    bool opt;

    for (i = 0; arr && i < n; i++) {
        o = 0;
        type[0] = '\0';
        if (!type_text(v[i]->type, type, &o)) {
            json_decref(arr);
            return art_src_fail(s, 0, err, "the type of graph %s '%.64s' is nested too deeply",
                                inputs ? "input" : "output", str(v[i]->name));
        }
        name = str(v[i]->name);
        e = json_pack("{s:s, s:s, s:o}", "name", name, "dtype", type, "shape",
                      shape_json(v[i]->type));
        opt = inputs &&
              ((v[i]->type && v[i]->type->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) ||
               (ninits && bsearch(&name, inits, ninits, sizeof(*inits), cmp_name)));
        if (e && opt)
            json_object_set_new(e, "optional", json_true());
        if (e == NULL || json_array_append_new(arr, e) != 0) {
            json_decref(arr);
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
    }
    *out = arr;
    return arr ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

/* Count one initializer (or a sparse one's values) into w. */
static enum mg_code count_tensor(struct art_src *s, const Onnx__TensorProto *t,
                                 struct art_weights *w, struct mg_error *err)
{
    const char *dtype = elem_name(t->data_type);
    uint64_t n = 1, bits, bytes;
    char show[SHOW_BUF];
    size_t i;

    art_name_show(str(t->name), strlen(str(t->name)), show);
    for (i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || !art_mul(n, (uint64_t)t->dims[i], &n))
            return art_src_fail(s, 0, err, "initializer '%s' has a negative or overflowing shape",
                                show);
    }
    if (!art_mul(n, art_dtype_bits(dtype), &bits))
        return art_src_fail(s, 0, err, "initializer '%s' overflows", show);
    bytes = bits / 8 + (bits % 8 != 0);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        w->data_complete = false;
    return art_weights_add(w, s, 0, dtype, n, bytes, err);
}

static void model_metadata(const Onnx__ModelProto *m, json_t *meta)
{
    json_t *ops = json_object();
    size_t i;

    if (m->has_ir_version)
        json_object_set_new(meta, "ir_version", json_integer(m->ir_version));
    if (m->producer_name && m->producer_name[0])
        json_object_set_new(meta, "producer_name", json_string(m->producer_name));
    if (m->producer_version && m->producer_version[0])
        json_object_set_new(meta, "producer_version", json_string(m->producer_version));
    if (m->domain && m->domain[0])
        json_object_set_new(meta, "domain", json_string(m->domain));
    if (m->has_model_version)
        json_object_set_new(meta, "model_version", json_integer(m->model_version));
    if (m->graph->name && m->graph->name[0])
        json_object_set_new(meta, "graph_name", json_string(m->graph->name));
    for (i = 0; ops && i < m->n_opset_import; i++) {
        const char *d = str(m->opset_import[i]->domain);
        json_object_set_new(ops, d, json_integer(m->opset_import[i]->version));
        if (d[0] == '\0' || strcmp(d, "ai.onnx") == 0)
            json_object_set_new(meta, "opset", json_integer(m->opset_import[i]->version));
    }
    json_object_set_new(meta, "opset_import", ops ? ops : json_null());
    for (i = 0; i < m->n_metadata_props && i < PROPS_MAX; i++) {
        json_t *props = json_object_get(meta, "metadata_props");
        const Onnx__StringStringEntryProto *p = m->metadata_props[i];
        if (props == NULL)
            json_object_set_new(meta, "metadata_props", props = json_object());
        if (props && strlen(str(p->value)) <= 1024)
            json_object_set_new(props, str(p->key), json_string(str(p->value)));
    }
}

static enum mg_code summarise(struct art_src *s, const struct art_introspect_limits *lim,
                              const Onnx__ModelProto *m, struct art_weights *w,
                              struct mg_error *err)
{
    const Onnx__GraphProto *g = m->graph;
    const char **inits = NULL;
    enum mg_code rc = MG_OK;
    size_t i;

    if (g->n_input + g->n_output > lim->max_io) {
        s->cap_hit = true;
        return art_src_fail(s, 0, err, "the graph has %zu inputs and outputs, over the cap of %u",
                            g->n_input + g->n_output, lim->max_io);
    }
    if (g->n_initializer > 0 && (inits = calloc(g->n_initializer, sizeof(*inits))) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    /* Every name first: a tensor over a cap stops the count below part way, and the
     * sorted list must not hold the unset (NULL) rest. */
    for (i = 0; i < g->n_initializer; i++)
        inits[i] = str(g->initializer[i]->name);
    for (i = 0; i < g->n_initializer && rc == MG_OK; i++)
        rc = count_tensor(s, g->initializer[i], w, err);
    for (i = 0; i < g->n_sparse_initializer && rc == MG_OK; i++) {
        if (g->sparse_initializer[i]->values != NULL)
            rc = count_tensor(s, g->sparse_initializer[i]->values, w, err);
    }
    if (g->n_initializer > 1)
        qsort(inits, g->n_initializer, sizeof(*inits), cmp_name);
    if (rc == MG_OK)
        rc = io_list(s, g->input, g->n_input, inits, g->n_initializer, true, &w->inputs, err);
    if (rc == MG_OK)
        rc = io_list(s, g->output, g->n_output, NULL, 0, false, &w->outputs, err);
    if (rc == MG_OK)
        model_metadata(m, w->metadata);
    free(inits);
    return rc;
}

enum mg_code art_onnx_read(struct art_src *s, const struct art_introspect_limits *lim,
                           struct art_weights *w, struct mg_error *err)
{
    struct onnx_filter f = {.s = s, .lim = lim, .err = err};
    struct pb_budget budget = {0, lim->max_onnx_memory, false};
    ProtobufCAllocator alloc = {pb_alloc, pb_free, &budget};
    Onnx__ModelProto *m = NULL;
    enum mg_code rc;

    if ((rc = art_onnx_filter(&f)) != MG_OK)
        goto out;
    m = onnx__model_proto__unpack(&alloc, f.len, f.out ? f.out : (const uint8_t *)"");
    if (m == NULL) {
        s->cap_hit = budget.over && f.seen_graph;
        if (budget.over)
            rc = art_src_fail(s, 0, err,
                              "decoding the graph structure needs more than the cap of %llu "
                              "bytes of memory",
                              (unsigned long long)lim->max_onnx_memory);
        else
            rc = art_src_fail(s, 0, err, "the model does not decode as an ONNX ModelProto");
        goto out;
    }
    if (m->graph == NULL) {
        rc = art_src_fail(s, 0, err, "the ModelProto has no graph");
        goto out;
    }
    rc = summarise(s, lim, m, w, err);
out:
    if (m != NULL)
        onnx__model_proto__free_unpacked(m, &alloc);
    free(f.out);
    return rc;
}
