/*
 * scan_pickle.c - a symbolic pickle machine, protocols 0 to 5 (CPython's Lib/pickle.py
 * and pickletools.py are the reference for every opcode).
 *
 * Nothing is built: each stack entry is a kind (mark positions, scalars, strings, bytes,
 * containers, imported names, call results) and, for a short string, its bytes in a capped
 * arena. The memo holds the same entries, so a name stored with PUT and fetched with GET is
 * still known. An import (GLOBAL, INST, STACK_GLOBAL) is allowed only when its module and
 * name are constant strings whose "module.name" is on the allowlist; a call (REDUCE, OBJ,
 * NEWOBJ, NEWOBJ_EX) only of an imported name; the extension registry (EXT1/2/4) never.
 *
 * A stream that ends early, an unknown opcode, a bad argument or a cap reached is "unknown"
 * after what was already found; Python would fail at the same byte, but not before it had
 * run whatever came first, so unsafe findings before it stand.
 */
#include "scan_int.h"

#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 256  /* longest string kept as a possible module or name */
#define LINE_KEEP 512     /* bytes of a protocol 0 argument line kept */
#define MAX_PICKLES 64    /* pickles read one after another from one stream */
#define MAX_PER_MEMBER 16 /* findings of one kind of problem kept per stream */
#define LEGACY_PICKLES 5  /* torch's legacy format: magic, protocol, sys_info, obj, keys */

enum vk {
    V_SCALAR,
    V_STR,         /* a short string, bytes in the arena */
    V_STR_OTHER,   /* a string too long, escaped or not text: never a name */
    V_STR_DROPPED, /* a short string the arena had no room for */
    V_BYTES,
    V_CONTAINER,
    V_GLOBAL, /* an allowed import */
    V_BAD,    /* an import already reported */
    V_OBJ,    /* the result of a call, a persistent id, a buffer */
};

struct val {
    uint8_t kind;
    uint32_t off, len; /* V_STR: arena bytes */
};

struct pk {
    struct art_src *s;
    struct art_report *r;
    const struct art_scan_opts *o;
    struct val *stack;
    size_t n, cap;
    size_t *marks;
    size_t nmarks, marks_cap;
    struct val *memo;
    uint8_t *memo_set;
    size_t memo_cap, memo_count;
    char *arena;
    size_t arena_len, arena_cap;
    unsigned reported; /* unsafe findings in this stream */
    bool failed;       /* something ended the analysis (malformed, cap) */
    bool done;         /* STOP */
    bool bad_call;     /* a refused import was called: Python would have run it */
    uint64_t op_at;    /* offset of the opcode being read */
    int proto;
    unsigned pickles;
    bool legacy_torch;
};

/* ---- failures ------------------------------------------------------------------------ */

static void unknown(struct pk *p, const char *rule, const char *why)
{
    if (!p->failed)
        art_report_add(p->r, "pickle", rule, false, p->op_at, "%s", why);
    p->failed = true;
}

static void malformed(struct pk *p, const char *why)
{
    unknown(p, "pickle-malformed", why);
}

static void unsafe(struct pk *p, const char *rule, const char *fmt, const char *a, const char *b)
{
    if (p->reported++ < MAX_PER_MEMBER)
        art_report_add(p->r, "pickle", rule, true, p->op_at, fmt, a, b);
    else if (p->r->verdict < ART_UNSAFE)
        p->r->verdict = ART_UNSAFE;
}

/* ---- the stack, the marks, the memo ------------------------------------------------- */

static bool grow(void **v, size_t *cap, size_t want, size_t elem, uint64_t limit)
{
    size_t nc;
    void *nv;

    if (want <= *cap)
        return true;
    if (want > limit)
        return false;
    nc = *cap ? *cap : 64;
    while (nc < want)
        nc *= 2;
    if (nc > limit)
        nc = (size_t)limit;
    if ((nv = realloc(*v, nc * elem)) == NULL)
        return false;
    *v = nv;
    *cap = nc;
    return true;
}

static void push(struct pk *p, uint8_t kind, uint32_t off, uint32_t len)
{
    if (p->failed)
        return;
    if (!grow((void **)&p->stack, &p->cap, p->n + 1, sizeof(*p->stack), p->o->max_pickle_stack)) {
        unknown(p, "pickle-cap", "the pickle's stack is deeper than the scanner's cap");
        return;
    }
    p->stack[p->n++] = (struct val){kind, off, len};
}

static size_t base(const struct pk *p)
{
    return p->nmarks ? p->marks[p->nmarks - 1] : 0;
}

/* Pop one entry above the current mark into *v. */
static bool pop(struct pk *p, struct val *v)
{
    if (p->n <= base(p)) {
        malformed(p, "an opcode pops from an empty stack");
        return false;
    }
    *v = p->stack[--p->n];
    return true;
}

static struct val *top(struct pk *p)
{
    if (p->n <= base(p)) {
        malformed(p, "an opcode needs a value on an empty stack");
        return NULL;
    }
    return &p->stack[p->n - 1];
}

/* Drop everything above the last mark and the mark; *first = the first entry, if any. */
static bool pop_mark(struct pk *p, struct val *first, size_t *count)
{
    size_t b;

    if (p->nmarks == 0) {
        malformed(p, "an opcode needs a MARK and there is none");
        return false;
    }
    b = p->marks[--p->nmarks];
    if (count)
        *count = p->n - b;
    if (first && p->n > b)
        *first = p->stack[b];
    p->n = b;
    return true;
}

static void memo_put(struct pk *p, uint64_t key)
{
    struct val *t = top(p);
    size_t old = p->memo_cap;

    if (t == NULL)
        return;
    if (key >= p->o->max_pickle_memo || !grow((void **)&p->memo, &p->memo_cap, (size_t)key + 1,
                                              sizeof(*p->memo), p->o->max_pickle_memo)) {
        unknown(p, "pickle-cap", "the pickle's memo is larger than the scanner's cap");
        return;
    }
    if (p->memo_cap != old) {
        uint8_t *ns = realloc(p->memo_set, p->memo_cap);
        if (ns == NULL) {
            unknown(p, "pickle-cap", "out of memory for the pickle's memo");
            return;
        }
        memset(ns + old, 0, p->memo_cap - old);
        p->memo_set = ns;
    }
    if (!p->memo_set[key])
        p->memo_count++;
    p->memo_set[key] = 1;
    p->memo[key] = *t;
}

static void memo_get(struct pk *p, uint64_t key)
{
    if (key >= p->memo_cap || !p->memo_set[key]) {
        malformed(p, "GET of a memo key that was never PUT");
        return;
    }
    push(p, p->memo[key].kind, p->memo[key].off, p->memo[key].len);
}

/* ---- strings ------------------------------------------------------------------------- */

static bool name_chars(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
              (c >= 'A' && c <= 'Z')))
            return false;
    }
    return n > 0;
}

/* Push a string whose bytes are s[0..n) (complete). */
static void push_text(struct pk *p, const char *s, size_t n)
{
    if (n > NAME_MAX_LEN || !name_chars(s, n)) {
        push(p, V_STR_OTHER, 0, 0);
        return;
    }
    if (p->arena_len + n > p->o->max_pickle_strings ||
        !grow((void **)&p->arena, &p->arena_cap, p->arena_len + n, 1, p->o->max_pickle_strings)) {
        push(p, V_STR_DROPPED, 0, 0);
        return;
    }
    memcpy(p->arena + p->arena_len, s, n);
    push(p, V_STR, (uint32_t)p->arena_len, (uint32_t)n);
    p->arena_len += n;
}

/* ---- reading arguments --------------------------------------------------------------- */

static bool rd(struct pk *p, void *out, size_t n, struct mg_error *err, enum mg_code *rc)
{
    if (art_src_left(p->s) < n) {
        malformed(p, "the pickle is truncated");
        return false;
    }
    *rc = art_src_read(p->s, out, n, err);
    if (*rc == MG_EINVAL) { /* the source ended early: a truncated stream */
        mg_error_clear(err);
        *rc = MG_OK;
        malformed(p, "the pickle is truncated");
        return false;
    }
    return *rc == MG_OK;
}

static uint64_t le(const uint8_t *b, size_t n)
{
    uint64_t v = 0;

    while (n-- > 0)
        v = v << 8 | b[n];
    return v;
}

/* A length-prefixed argument of lenbytes (1, 4 or 8); short text is kept in buf. */
static bool counted(struct pk *p, size_t lenbytes, char *buf, size_t cap, uint64_t *len, bool *kept,
                    struct mg_error *err, enum mg_code *rc)
{
    uint8_t b[8];

    if (!rd(p, b, lenbytes, err, rc))
        return false;
    *len = le(b, lenbytes);
    if (*len > art_src_left(p->s)) {
        malformed(p, "a length runs past the end of the pickle");
        return false;
    }
    *kept = buf != NULL && *len <= cap;
    if (*kept)
        return rd(p, buf, (size_t)*len, err, rc);
    *rc = art_src_skip(p->s, *len, err);
    if (*rc == MG_EINVAL) {
        mg_error_clear(err);
        *rc = MG_OK;
        malformed(p, "the pickle is truncated");
        return false;
    }
    return *rc == MG_OK;
}

/* A protocol 0 argument line (to '\n', which is consumed). The first LINE_KEEP bytes go
 * into buf; *len is the whole length; *whole is false when it was longer. */
static bool line(struct pk *p, char *buf, size_t *len, bool *whole, struct mg_error *err,
                 enum mg_code *rc)
{
    const uint8_t *q, *nl;
    size_t got, take;

    *len = 0;
    for (;;) {
        if ((*rc = art_src_peek(p->s, ART_SRC_BUF, &q, &got, err)) != MG_OK)
            return false;
        if (got == 0) {
            malformed(p, "the pickle is truncated in an argument line");
            return false;
        }
        nl = memchr(q, '\n', got);
        take = nl ? (size_t)(nl - q) : got;
        if (*len < LINE_KEEP)
            memcpy(buf + *len, q, take < LINE_KEEP - *len ? take : LINE_KEEP - *len);
        *len += take;
        if ((*rc = art_src_skip(p->s, take + (nl != NULL), err)) != MG_OK)
            return false;
        if (nl)
            break;
    }
    *whole = *len <= LINE_KEEP;
    buf[*len < LINE_KEEP ? *len : LINE_KEEP] = '\0';
    if (*len > 0 && *whole && buf[*len - 1] == '\r') /* pickle tolerates "\r\n" lines */
        buf[--*len] = '\0';
    return true;
}

static bool decimal(const char *s, size_t n, bool allow_l, uint64_t *v)
{
    size_t i = 0;

    *v = 0;
    if (n > 0 && (s[0] == '-' || s[0] == '+'))
        i++;
    if (allow_l && n > i && s[n - 1] == 'L')
        n--;
    if (i == n)
        return false;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (*v < UINT64_MAX / 10)
            *v = *v * 10 + (uint64_t)(s[i] - '0');
    }
    return true;
}

/* ---- imports ------------------------------------------------------------------------- */

/* Python 2 spellings that the unpickler maps for protocols < 3 (_compat_pickle). */
static const char *compat(const char *m)
{
    static const struct {
        const char *from, *to;
    } map[] = {{"__builtin__", "builtins"},
               {"copy_reg", "copyreg"},
               {"cPickle", "pickle"},
               {"commands", "subprocess"},
               {"exceptions", "builtins"}};
    size_t i;

    for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (strcmp(m, map[i].from) == 0)
            return map[i].to;
    }
    return m;
}

/* Check an import of module.name and push what it gives. */
static void import(struct pk *p, const char *how, const char *mod, size_t ml, const char *name,
                   size_t nl)
{
    char full[2 * LINE_KEEP + 2], shown[4 * LINE_KEEP + 64];
    char m[LINE_KEEP + 1];
    const char *cm;

    if (ml > LINE_KEEP || nl > LINE_KEEP) {
        unsafe(p, "pickle-import", "%s of a name longer than %s bytes", how, "512");
        push(p, V_BAD, 0, 0);
        return;
    }
    memcpy(m, mod, ml);
    m[ml] = '\0';
    cm = compat(m);
    snprintf(full, sizeof(full), "%s.%.*s", cm, (int)nl, name);
    if (memchr(mod, '\0', ml) == NULL && memchr(name, '\0', nl) == NULL &&
        art_scan_allowed(full, p->o)) {
        push(p, V_GLOBAL, 0, 0);
        return;
    }
    if (cm != m)
        snprintf(shown, sizeof(shown), "%s (written %s.%.*s)", full, m, (int)nl, name);
    else
        snprintf(shown, sizeof(shown), "%s", full);
    unsafe(p, "pickle-import",
           "%s imports %s, which torch.load(weights_only=True) refuses; only data may be "
           "unpickled (a project's own class needs --scan-allow)",
           how, shown);
    push(p, V_BAD, 0, 0);
}

static void call_of(struct pk *p, const struct val *callable, const char *how)
{
    if (callable->kind == V_BAD)
        p->bad_call = true; /* reported at its import */
    if (callable->kind == V_GLOBAL || callable->kind == V_BAD)
        return;
    unsafe(p, "pickle-call", "%s calls a value that is not an imported name%s", how, "");
}

/* ---- one opcode ---------------------------------------------------------------------- */

static enum mg_code step(struct pk *p, struct mg_error *err)
{
    char a[LINE_KEEP + 1], b[LINE_KEEP + 1];
    uint8_t op, x[8];
    struct val v = {0}, w = {0}, first = {0};
    uint64_t len, n;
    size_t la, lb, count;
    bool wa, wb, kept;
    enum mg_code rc = MG_OK;

    p->op_at = p->s->off;
    if (!rd(p, &op, 1, err, &rc))
        return rc;
    switch (op) {
    case 0x80: /* PROTO */
        if (!rd(p, x, 1, err, &rc))
            return rc;
        if (x[0] > 5)
            unknown(p, "pickle-opcode", "the pickle's protocol is newer than 5");
        p->proto = x[0];
        break;
    case 0x95: /* FRAME */
        (void)rd(p, x, 8, err, &rc);
        break;
    case '.': /* STOP */
        if (pop(p, &v))
            p->done = true;
        break;
    case '(': /* MARK */
        if (!grow((void **)&p->marks, &p->marks_cap, p->nmarks + 1, sizeof(*p->marks),
                  p->o->max_pickle_stack)) {
            unknown(p, "pickle-cap", "the pickle nests more MARKs than the scanner's cap");
            break;
        }
        p->marks[p->nmarks++] = p->n;
        break;
    case '0': /* POP */
        if (p->n > base(p))
            p->n--;
        else
            (void)pop_mark(p, NULL, NULL);
        break;
    case '1': /* POP_MARK */
        (void)pop_mark(p, NULL, NULL);
        break;
    case '2': /* DUP */
        if (top(p))
            push(p, p->stack[p->n - 1].kind, p->stack[p->n - 1].off, p->stack[p->n - 1].len);
        break;
    case 'N':
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
        push(p, V_SCALAR, 0, 0);
        break;
    case 'J': /* BININT */
    case 'M': /* BININT2 */
    case 'K': /* BININT1 */
    case 'G': /* BINFLOAT */
        if (rd(p, x, op == 'J' ? 4 : op == 'M' ? 2 : op == 'K' ? 1 : 8, err, &rc))
            push(p, V_SCALAR, 0, 0);
        break;
    case 0x8a: /* LONG1 */
    case 0x8b: /* LONG4 */
        if (counted(p, op == 0x8a ? 1 : 4, NULL, 0, &len, &kept, err, &rc))
            push(p, V_SCALAR, 0, 0);
        if (p->pickles == 0 && p->n == 1 && len == 10 && op == 0x8a)
            p->legacy_torch = true; /* torch's legacy magic number, 0x1950a86a20f9469cfc6c */
        break;
    case 'I': /* INT */
    case 'L': /* LONG */
    case 'F': /* FLOAT */
        if (!line(p, a, &la, &wa, err, &rc))
            return rc;
        if (!wa) /* a long number: its first LINE_KEEP bytes are checked */
            la = LINE_KEEP;
        if (op != 'F' && !decimal(a, la, op == 'L' || !wa, &n))
            malformed(p, "an INT or LONG argument is not a decimal number");
        else if (op == 'F' && (la == 0 || strspn(a, "0123456789+-.eEinfatyINFATY") != la))
            malformed(p, "a FLOAT argument is not a number");
        else
            push(p, V_SCALAR, 0, 0);
        break;
    case 'S': /* STRING: a quoted repr */
        if (!line(p, a, &la, &wa, err, &rc))
            return rc;
        if (la < 2 || (a[0] != '\'' && a[0] != '"') || (wa && a[la - 1] != a[0]))
            malformed(p, "a STRING argument is not quoted");
        else if (wa && memchr(a, '\\', la) == NULL)
            push_text(p, a + 1, la - 2);
        else
            push(p, V_STR_OTHER, 0, 0);
        break;
    case 'V': /* UNICODE: raw-unicode-escape */
        if (!line(p, a, &la, &wa, err, &rc))
            return rc;
        if (wa && memchr(a, '\\', la) == NULL)
            push_text(p, a, la);
        else
            push(p, V_STR_OTHER, 0, 0);
        break;
    case 'T':    /* BINSTRING */
    case 'U':    /* SHORT_BINSTRING */
    case 'X':    /* BINUNICODE */
    case 0x8c:   /* SHORT_BINUNICODE */
    case 0x8d: { /* BINUNICODE8 */
        size_t lb8 = op == 'U' || op == 0x8c ? 1 : op == 0x8d ? 8 : 4;
        if (!counted(p, lb8, a, NAME_MAX_LEN, &len, &kept, err, &rc))
            return rc;
        if (op == 'T' && len > INT32_MAX)
            malformed(p, "a BINSTRING length is negative");
        else if (kept)
            push_text(p, a, (size_t)len);
        else
            push(p, V_STR_OTHER, 0, 0);
        break;
    }
    case 'B':    /* BINBYTES */
    case 'C':    /* SHORT_BINBYTES */
    case 0x8e:   /* BINBYTES8 */
    case 0x96: { /* BYTEARRAY8 */
        size_t lb8 = op == 'C' ? 1 : op == 'B' ? 4 : 8;
        if (counted(p, lb8, NULL, 0, &len, &kept, err, &rc))
            push(p, V_BYTES, 0, 0);
        break;
    }
    case 'P': /* PERSID */
        if (line(p, a, &la, &wa, err, &rc))
            push(p, V_OBJ, 0, 0);
        break;
    case 'Q': /* BINPERSID */
        if (pop(p, &v))
            push(p, V_OBJ, 0, 0);
        break;
    case 'R': /* REDUCE */
        if (pop(p, &v) && pop(p, &w)) {
            call_of(p, &w, "REDUCE");
            push(p, V_OBJ, 0, 0);
        }
        break;
    case 0x81: /* NEWOBJ */
        if (pop(p, &v) && pop(p, &w)) {
            call_of(p, &w, "NEWOBJ");
            push(p, V_OBJ, 0, 0);
        }
        break;
    case 0x92: /* NEWOBJ_EX */
        if (pop(p, &v) && pop(p, &v) && pop(p, &w)) {
            call_of(p, &w, "NEWOBJ_EX");
            push(p, V_OBJ, 0, 0);
        }
        break;
    case 'o': /* OBJ */
        if (pop_mark(p, &first, &count)) {
            if (count == 0)
                malformed(p, "OBJ without a class");
            else {
                call_of(p, &first, "OBJ");
                push(p, V_OBJ, 0, 0);
            }
        }
        break;
    case 'c': /* GLOBAL */
    case 'i': /* INST */
        if (!line(p, a, &la, &wa, err, &rc) || !line(p, b, &lb, &wb, err, &rc))
            return rc;
        if (op == 'i' && !pop_mark(p, NULL, NULL))
            break;
        import(p, op == 'c' ? "GLOBAL" : "INST", a, wa ? la : LINE_KEEP + 1, b,
               wb ? lb : LINE_KEEP + 1);
        if (op == 'i' && !p->failed) {
            p->bad_call |= p->stack[p->n - 1].kind == V_BAD;
            p->stack[p->n - 1].kind = V_OBJ;
        }
        break;
    case 0x93: /* STACK_GLOBAL */
        if (!pop(p, &w) || !pop(p, &v))
            break;
        if (v.kind == V_STR && w.kind == V_STR) {
            import(p, "STACK_GLOBAL", p->arena + v.off, v.len, p->arena + w.off, w.len);
        } else if (v.kind == V_STR_DROPPED || w.kind == V_STR_DROPPED) {
            unknown(p, "pickle-cap", "STACK_GLOBAL names a string the scanner had no room for");
        } else {
            unsafe(p, "pickle-computed-import",
                   "STACK_GLOBAL imports a name that is not a constant string (%s %s); names "
                   "built at load time cannot be checked",
                   v.kind == V_STR ? "module known," : "module computed,",
                   w.kind == V_STR ? "name known" : "name computed");
            push(p, V_BAD, 0, 0);
        }
        break;
    case 0x82: /* EXT1 */
    case 0x83: /* EXT2 */
    case 0x84: /* EXT4 */
        if (!rd(p, x, op == 0x82 ? 1 : op == 0x83 ? 2 : 4, err, &rc))
            return rc;
        unsafe(p, "pickle-extension",
               "%s imports through copyreg's extension registry, which only code can fill%s",
               op == 0x82   ? "EXT1"
               : op == 0x83 ? "EXT2"
                            : "EXT4",
               "");
        push(p, V_BAD, 0, 0);
        break;
    case 'a': /* APPEND */
    case 'b': /* BUILD */
        if (pop(p, &v))
            (void)top(p);
        break;
    case 's': /* SETITEM */
        if (pop(p, &v) && pop(p, &w))
            (void)top(p);
        break;
    case 'e':  /* APPENDS */
    case 'u':  /* SETITEMS */
    case 0x90: /* ADDITEMS */
        if (pop_mark(p, NULL, &count))
            (void)top(p);
        break;
    case 'd':  /* DICT */
    case 'l':  /* LIST */
    case 't':  /* TUPLE */
    case 0x91: /* FROZENSET */
        if (pop_mark(p, NULL, NULL))
            push(p, V_CONTAINER, 0, 0);
        break;
    case '}':  /* EMPTY_DICT */
    case ']':  /* EMPTY_LIST */
    case ')':  /* EMPTY_TUPLE */
    case 0x8f: /* EMPTY_SET */
        push(p, V_CONTAINER, 0, 0);
        break;
    case 0x85: /* TUPLE1 */
    case 0x86: /* TUPLE2 */
    case 0x87: /* TUPLE3 */
        for (count = 0; count < (size_t)(op - 0x84) && pop(p, &v); count++)
            ;
        if (count == (size_t)(op - 0x84))
            push(p, V_CONTAINER, 0, 0);
        break;
    case 'g': /* GET */
    case 'p': /* PUT */
        if (!line(p, a, &la, &wa, err, &rc))
            return rc;
        if (!wa || !decimal(a, la, false, &n) || a[0] == '-' || a[0] == '+')
            malformed(p, "a GET or PUT key is not a decimal number");
        else if (op == 'g')
            memo_get(p, n);
        else
            memo_put(p, n);
        break;
    case 'h': /* BINGET */
    case 'j': /* LONG_BINGET */
    case 'q': /* BINPUT */
    case 'r': /* LONG_BINPUT */
        if (!rd(p, x, op == 'h' || op == 'q' ? 1 : 4, err, &rc))
            return rc;
        n = le(x, op == 'h' || op == 'q' ? 1 : 4);
        if (op == 'h' || op == 'j')
            memo_get(p, n);
        else
            memo_put(p, n);
        break;
    case 0x94: /* MEMOIZE */
        memo_put(p, p->memo_count);
        break;
    case 0x97: /* NEXT_BUFFER */
        push(p, V_OBJ, 0, 0);
        break;
    case 0x98: /* READONLY_BUFFER */
        (void)top(p);
        break;
    default: {
        char why[64];
        snprintf(why, sizeof(why), "unknown opcode 0x%02x", op);
        unknown(p, "pickle-opcode", why);
        break;
    }
    }
    return rc;
}

static void reset(struct pk *p)
{
    p->n = p->nmarks = p->memo_count = 0;
    p->arena_len = 0;
    if (p->memo_set)
        memset(p->memo_set, 0, p->memo_cap);
    p->done = false;
    p->proto = 0;
}

enum mg_code art_pickle_scan(struct art_src *s, struct art_report *r, bool probe,
                             struct mg_error *err)
{
    struct art_report local = *r;
    struct pk p;
    const uint8_t *q;
    size_t got;
    enum mg_code rc = MG_OK;
    json_t *found = NULL;

    memset(&p, 0, sizeof(p));
    p.s = s;
    p.o = r->opts;
    if (probe) {
        /* Findings go to a scratch list first: a malformed stream in which nothing refused
         * was called was not a pickle after all. */
        found = json_array();
        if (found == NULL)
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        local.findings = found;
        local.verdict = ART_CLEAN;
        local.dropped = 0;
        p.r = &local;
    } else {
        p.r = r;
    }
    for (;;) {
        while (!p.done && !p.failed && rc == MG_OK)
            rc = step(&p, err);
        if (rc != MG_OK || p.failed)
            break;
        /* After STOP: torch's legacy format is five pickles and then raw storages; any
         * other stream may hold more pickles (each a pickle.load() away). */
        p.pickles++;
        if (p.legacy_torch && p.pickles >= LEGACY_PICKLES)
            break;
        if (art_src_left(s) == 0 || p.pickles >= MAX_PICKLES)
            break;
        if ((rc = art_src_peek(s, 2, &q, &got, err)) != MG_OK || got == 0)
            break;
        if (!p.legacy_torch && !(q[0] == 0x80 && got == 2 && q[1] <= 5))
            break;
        reset(&p);
    }
    if (probe && rc == MG_OK && (!p.failed || p.bad_call)) {
        size_t i;
        json_t *f;
        json_array_foreach(found, i, f)
        {
            if (r->findings && json_array_size(r->findings) < ART_SCAN_MAX_FINDINGS)
                json_array_append(r->findings, f);
            else
                r->dropped++;
        }
        r->dropped += local.dropped;
        if (local.verdict > r->verdict)
            r->verdict = local.verdict;
    }
    json_decref(found);
    free(p.stack);
    free(p.marks);
    free(p.memo);
    free(p.memo_set);
    free(p.arena);
    return rc;
}
