/*
 * onnx_filter.c - bounds an ONNX model before libprotobuf-c decodes it.
 *
 * protobuf-c unpacks a whole message from one buffer, and an ONNX file is one message
 * whose tensors (raw_data and the typed arrays) may be gigabytes. So the model streams
 * through this filter first, which walks only the protobuf framing (tags, varints,
 * lengths) guided by the descriptors protoc-c generated from onnx.proto, and copies what
 * the introspection needs into a buffer capped at max_onnx_structure bytes: tensor
 * payloads, the graph's nodes and value_info, functions, training info and doc strings are
 * skipped as they pass (seeked over in a plain file), and so are fields onnx.proto does not
 * know. Every nested message is re-framed here, so its depth is bounded before protobuf-c
 * recurses into it, and every length is checked against its enclosing message and the
 * file before a byte of it is read. Field values themselves are decoded by protobuf-c.
 */
#include "onnx_int.h"

#include <stdlib.h>
#include <string.h>

#include "introspect.h"
#include "../base/text.h"

#define DEPTH_MAX 32

/* Fields of a kept message that hold nothing the introspection reads. */
static bool dropped(const ProtobufCMessageDescriptor *d, unsigned field)
{
    if (d == &onnx__model_proto__descriptor)
        return field == 6 || field == 20 || field == 25; /* doc_string, training_info, functions */
    if (d == &onnx__graph_proto__descriptor)
        return field == 1 || field == 10 || field == 13 || field == 14; /* node, doc_string,
                                                                          value_info, annotations */
    if (d == &onnx__tensor_proto__descriptor)
        return field != 1 && field != 2 && field != 8 && field != 13 && field != 14;
    if (d == &onnx__value_info_proto__descriptor)
        return field == 3; /* doc_string */
    return false;
}

static enum mg_code grow(struct onnx_filter *f, size_t n)
{
    size_t ncap;
    uint8_t *p;

    if (n <= f->cap - f->len)
        return MG_OK;
    if (n > f->lim->max_onnx_structure - f->len) {
        /* Only a model whose graph was reached counts as ONNX too large; before that, a
         * sniffed blob may be another protobuf altogether. */
        f->s->cap_hit = f->seen_graph;
        return art_src_fail(f->s, f->s->off, f->err,
                            "the graph structure (without tensor data, nodes and functions) is "
                            "larger than the cap of %llu bytes",
                            (unsigned long long)f->lim->max_onnx_structure);
    }
    ncap = f->cap ? f->cap : 4096;
    while (ncap - f->len < n)
        ncap *= 2;
    if (ncap > f->lim->max_onnx_structure)
        ncap = (size_t)f->lim->max_onnx_structure;
    if ((p = realloc(f->out, ncap)) == NULL)
        return mg_fail(f->err, MG_ENOMEM, NULL, "out of memory");
    f->out = p;
    f->cap = ncap;
    return MG_OK;
}

static size_t varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;

    do {
        p[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            p[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

static enum mg_code emit_varint(struct onnx_filter *f, uint64_t v)
{
    enum mg_code rc = grow(f, 10);

    if (rc == MG_OK)
        f->len += varint_put(f->out + f->len, v);
    return rc;
}

/* A varint from the source (at most 10 bytes). */
static enum mg_code read_varint(struct onnx_filter *f, uint64_t *v)
{
    const uint8_t *p;
    size_t got, i;
    enum mg_code rc;

    *v = 0;
    if ((rc = art_src_peek(f->s, 10, &p, &got, f->err)) != MG_OK)
        return rc;
    for (i = 0; i < got; i++) {
        *v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if ((p[i] & 0x80) == 0)
            return art_src_skip(f->s, i + 1, f->err);
    }
    return art_src_fail(f->s, f->s->off, f->err,
                        got < 10 ? "the file ends inside a varint" : "a varint is over 10 bytes");
}

/* Copy n bytes of the source to the output (a string is checked for UTF-8). */
static enum mg_code copy_bytes(struct onnx_filter *f, uint64_t n, bool text)
{
    uint64_t at = f->s->off;
    enum mg_code rc;

    if (n > SIZE_MAX || (rc = grow(f, (size_t)n)) != MG_OK)
        return n > SIZE_MAX ? mg_fail(f->err, MG_ENOMEM, NULL, "out of memory") : rc;
    if ((rc = art_src_read(f->s, f->out + f->len, (size_t)n, f->err)) != MG_OK)
        return rc;
    if (text && !mg_utf8_valid((const char *)f->out + f->len, (size_t)n))
        return art_src_fail(f->s, at, f->err, "a string field is not valid UTF-8");
    f->len += (size_t)n;
    return MG_OK;
}

/* The wire types a field of this type may arrive with. */
static bool wire_ok(const ProtobufCFieldDescriptor *fd, unsigned wt)
{
    bool packable = fd->label == PROTOBUF_C_LABEL_REPEATED;

    switch (fd->type) {
    case PROTOBUF_C_TYPE_MESSAGE:
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
        return wt == 2;
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return wt == 1 || (packable && wt == 2);
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return wt == 5 || (packable && wt == 2);
    default:
        return wt == 0 || (packable && wt == 2);
    }
}

static enum mg_code filter_message(struct onnx_filter *f, const ProtobufCMessageDescriptor *d,
                                   uint64_t end, int depth);

/* A length-delimited field: re-framed when it is a message, copied or skipped otherwise. */
static enum mg_code filter_delimited(struct onnx_filter *f, const ProtobufCFieldDescriptor *fd,
                                     uint64_t tag, uint64_t end, int depth, bool drop)
{
    uint64_t at = f->s->off, n, body;
    size_t mark, k;
    enum mg_code rc;
    uint8_t tmp[10];

    if ((rc = read_varint(f, &n)) != MG_OK)
        return rc;
    if (n > end - f->s->off || n > art_src_left(f->s))
        return art_src_fail(f->s, at, f->err,
                            "a field claims %llu bytes, past the end of its message or the file",
                            (unsigned long long)n);
    if (drop)
        return art_src_skip(f->s, n, f->err);
    if ((rc = emit_varint(f, tag)) != MG_OK)
        return rc;
    if (fd->type != PROTOBUF_C_TYPE_MESSAGE) {
        if ((rc = emit_varint(f, n)) != MG_OK)
            return rc;
        return copy_bytes(f, n, fd->type == PROTOBUF_C_TYPE_STRING);
    }
    if (depth >= DEPTH_MAX)
        return art_src_fail(f->s, at, f->err, "messages nest deeper than %d", DEPTH_MAX);
    /* Room for the longest length varint; moved down once the body's size is known. */
    if ((rc = grow(f, 10)) != MG_OK)
        return rc;
    if (fd->descriptor == &onnx__graph_proto__descriptor && depth == 0)
        f->seen_graph = true;
    mark = f->len;
    f->len += 10;
    if ((rc = filter_message(f, fd->descriptor, f->s->off + n, depth + 1)) != MG_OK)
        return rc;
    body = f->len - mark - 10;
    k = varint_put(tmp, body);
    memcpy(f->out + mark, tmp, k);
    memmove(f->out + mark + k, f->out + mark + 10, (size_t)body);
    f->len -= 10 - k;
    return MG_OK;
}

/* One field at the current offset of message d (which ends at `end`). */
static enum mg_code filter_field(struct onnx_filter *f, const ProtobufCMessageDescriptor *d,
                                 uint64_t end, int depth)
{
    const ProtobufCFieldDescriptor *fd;
    uint64_t at = f->s->off, tag, v;
    unsigned wt, field;
    uint8_t fixed[8];
    enum mg_code rc;
    bool drop;

    if ((rc = read_varint(f, &tag)) != MG_OK)
        return rc;
    wt = (unsigned)(tag & 7);
    if (tag >> 3 == 0 || tag >> 3 > 536870911)
        return art_src_fail(f->s, at, f->err, "field number %llu is out of range",
                            (unsigned long long)(tag >> 3));
    field = (unsigned)(tag >> 3);
    if (wt == 3 || wt == 4 || wt > 5)
        return art_src_fail(f->s, at, f->err, "field %u has wire type %u, which ONNX never uses",
                            field, wt);
    fd = protobuf_c_message_descriptor_get_field(d, field);
    drop = fd == NULL || dropped(d, field);
    if (fd != NULL && !wire_ok(fd, wt))
        return art_src_fail(f->s, at, f->err, "field %s.%s has the wrong wire type %u",
                            d->short_name, fd->name, wt);
    switch (wt) {
    case 0:
        if ((rc = read_varint(f, &v)) != MG_OK)
            return rc;
        if (!drop && ((rc = emit_varint(f, tag)) != MG_OK || (rc = emit_varint(f, v)) != MG_OK))
            return rc;
        break;
    case 1:
    case 5:
        if ((rc = art_src_read(f->s, fixed, wt == 1 ? 8 : 4, f->err)) != MG_OK)
            return rc;
        if (!drop && ((rc = emit_varint(f, tag)) != MG_OK || (rc = grow(f, 8)) != MG_OK))
            return rc;
        if (!drop) {
            memcpy(f->out + f->len, fixed, wt == 1 ? 8 : 4);
            f->len += wt == 1 ? 8 : 4;
        }
        break;
    default:
        if ((rc = filter_delimited(f, fd, tag, end, depth, drop)) != MG_OK)
            return rc;
    }
    if (f->s->off > end)
        return art_src_fail(f->s, at, f->err, "a field runs past the end of its %s message",
                            d->short_name);
    return MG_OK;
}

static enum mg_code filter_message(struct onnx_filter *f, const ProtobufCMessageDescriptor *d,
                                   uint64_t end, int depth)
{
    const uint8_t *p;
    size_t got;
    enum mg_code rc;

    while (f->s->off < end) {
        if (end == UINT64_MAX) { /* the top level ends with the file */
            if ((rc = art_src_peek(f->s, 1, &p, &got, f->err)) != MG_OK)
                return rc;
            if (got == 0)
                break;
        }
        f->fields++;
        if ((rc = filter_field(f, d, end, depth)) != MG_OK)
            return rc;
    }
    return MG_OK;
}

enum mg_code art_onnx_filter(struct onnx_filter *f)
{
    f->fields = 0;
    return filter_message(f, &onnx__model_proto__descriptor, UINT64_MAX, 0);
}
