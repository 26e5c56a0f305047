/*
 * scan_jinja.c - a chat template (Jinja) against the list of what chat templates use.
 *
 * The template is tokenized as Jinja's own lexer does (text, {{ }}, {% %}, {# #},
 * {% raw %}, whitespace control, braces balanced inside a tag, strings with Python
 * escapes), then every name in every tag is classified by what comes before it: an
 * attribute after '.', a filter after '|', a test after 'is', a keyword argument before
 * '=', a statement keyword first in a {% %} tag, else a variable. Variables must be
 * bound by the template itself (set, for, macro, with, call) or be on the list of globals
 * chat renderers pass; attributes, filters, tests and statements must be on their lists.
 * Any dunder (in a name or in a string, escapes decoded), the attr filter, and strings
 * that start with '_' anywhere but as a plain subscript key (the start of a dunder built at
 * render time: '_' ~ '_class__', or kept in a variable first) are unsafe. A dunder must
 * start with "__", so 'call_' ~ loop.index is fine.
 *
 * Nothing is rendered and nothing is allocated beyond the token array (capped).
 */
#include "scan_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 1000000
#define MAX_BOUND 512 /* names a template binds (each name is looked up among them) */
#define SHOW 120

enum tt { T_NAME, T_STR, T_NUM, T_OP, T_BEGIN, T_END };

struct tok {
    uint8_t type;
    uint8_t stmt; /* T_BEGIN: 1 for {%, 0 for {{ */
    uint32_t off, len;
};

struct jx {
    const char *t;
    size_t n;
    struct tok *v;
    size_t nv, cap;
    const char *key;
    struct art_report *r;
    const struct tok **bound; /* names the template binds (variables and attributes) */
    size_t nbound, bound_cap;
    unsigned reported;
    bool failed;
    bool bound_full; /* more than MAX_BOUND bindings */
};

static const char *const globals_ok[] = {"messages",
                                         "tools",
                                         "documents",
                                         "add_generation_prompt",
                                         "bos_token",
                                         "eos_token",
                                         "pad_token",
                                         "unk_token",
                                         "sep_token",
                                         "cls_token",
                                         "mask_token",
                                         "raise_exception",
                                         "strftime_now",
                                         "namespace",
                                         "range",
                                         "dict",
                                         "loop",
                                         "caller",
                                         "tools_in_user_message",
                                         "date_string",
                                         "custom_tools",
                                         "builtin_tools",
                                         "enable_thinking",
                                         "reasoning_effort",
                                         "add_vision_id",
                                         "xml_tools",
                                         "python_tools",
                                         "tool_choice",
                                         "system_message",
                                         "keep_past_thinking",
                                         "thinking",
                                         "true",
                                         "false",
                                         "none",
                                         "True",
                                         "False",
                                         "None",
                                         "varname",
                                         NULL};

static const char *const attrs_ok[] = {
    /* str, list and dict methods */
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper",
    "lower", "title", "capitalize", "replace", "find", "rfind", "count", "join", "items", "keys",
    "values", "get", "append", "extend", "insert", "pop", "index", "isdigit", "isspace", "isalpha",
    "isalnum", "zfill",
    /* loop */
    "index0", "revindex", "revindex0", "first", "last", "length", "previtem", "nextitem", "depth",
    "depth0", "cycle", "changed",
    /* message, tool and document fields */
    "role", "content", "name", "type", "function", "arguments", "tool_calls", "tool_call_id", "id",
    "text", "image", "image_url", "url", "video", "audio", "description", "parameters",
    "properties", "required", "enum", "reasoning_content", "reasoning", "thinking", "tools",
    "tool_name", "call_id", "output", "input", "source", "title", "data", "value", "key",
    "responses", "response", "default", "format", "examples", "additionalProperties", "return",
    "returns", "strict", "schema", "json", "tool", "results", "result", "doc", "snippet",
    "document", "documents", "metadata", "prefix", "code", "language", "path", "message",
    "messages", "system", "user", "assistant", "channel", "recipient", "date", "refusal",
    "annotations", "citations", NULL};

static const char *const filters_ok[] = {
    "trim",     "tojson",    "length",      "count",  "upper",      "lower",   "capitalize",
    "title",    "join",      "default",     "d",      "first",      "last",    "list",
    "map",      "select",    "selectattr",  "reject", "rejectattr", "replace", "string",
    "int",      "float",     "round",       "safe",   "indent",     "sort",    "unique",
    "reverse",  "sum",       "min",         "max",    "abs",        "items",   "center",
    "truncate", "wordcount", "escape",      "e",      "batch",      "slice",   "dictsort",
    "groupby",  "striptags", "forceescape", "bool",   NULL};

static const char *const tests_ok[] = {
    "defined", "undefined", "none",    "string",  "mapping", "iterable", "sequence", "number",
    "integer", "float",     "boolean", "true",    "false",   "even",     "odd",      "divisibleby",
    "equalto", "eq",        "ne",      "lt",      "gt",      "le",       "ge",       "in",
    "lower",   "upper",     "sameas",  "escaped", NULL};

static const char *const stmts_ok[] = {
    "if",    "elif",     "else",       "endif",         "for",    "endfor",    "set",  "endset",
    "macro", "endmacro", "call",       "endcall",       "filter", "endfilter", "with", "endwith",
    "break", "continue", "generation", "endgeneration", "do",     NULL};

static const char *const keywords[] = {"and",  "or",   "not",       "in",   "is",
                                       "if",   "else", "recursive", "true", "false",
                                       "none", "True", "False",     "None", NULL};

static bool tok_is(const struct jx *j, const struct tok *k, const char *s)
{
    return k->len == strlen(s) && memcmp(j->t + k->off, s, k->len) == 0;
}

static bool in_list(const struct jx *j, const struct tok *k, const char *const *l)
{
    for (; *l; l++) {
        if (tok_is(j, k, *l))
            return true;
    }
    return false;
}

static bool is_op(const struct jx *j, const struct tok *k, const char *s)
{
    return k->type == T_OP && tok_is(j, k, s);
}

/* ---- findings ------------------------------------------------------------------------ */

static void finding(struct jx *j, const struct tok *k, const char *rule, bool high,
                    const char *what)
{
    size_t from = k->off, to, i;
    char show[SHOW + 1];

    /* Show the tag around the token: back to its start, up to SHOW bytes. */
    while (
        from > 0 && k->off - from < SHOW / 2 &&
        !(from >= 2 && j->t[from - 2] == '{' && (j->t[from - 1] == '{' || j->t[from - 1] == '%')))
        from--;
    to = from + SHOW < j->n ? from + SHOW : j->n;
    for (i = from; i < to; i++)
        show[i - from] = (j->t[i] >= 0x20 && j->t[i] < 0x7f) ? j->t[i] : ' ';
    show[to - from] = '\0';
    if (j->reported++ < 16)
        art_report_add(j->r, "jinja", rule, high, k->off, "%s: %s '%.*s' in `%s` at byte %u",
                       j->key, what, (int)(k->len > 64 ? 64 : k->len), j->t + k->off, show, k->off);
    else if (j->r->verdict < (high ? ART_UNSAFE : ART_UNKNOWN))
        j->r->verdict = high ? ART_UNSAFE : ART_UNKNOWN;
}

/* ---- the lexer ----------------------------------------------------------------------- */

static bool add(struct jx *j, uint8_t type, size_t off, size_t len)
{
    struct tok *nv;
    size_t nc;

    if (j->nv == j->cap) {
        if (j->cap >= MAX_TOKENS)
            return false;
        nc = j->cap ? j->cap * 2 : 256;
        if ((nv = realloc(j->v, nc * sizeof(*nv))) == NULL)
            return false;
        j->v = nv;
        j->cap = nc;
    }
    j->v[j->nv++] = (struct tok){type, 0, (uint32_t)off, (uint32_t)len};
    return true;
}

static bool name_start(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

/* Skip to the end of "{% raw %}…{% endraw %}" from just after "raw"; the new position. */
static size_t skip_raw(const char *t, size_t n, size_t i)
{
    const char *e;

    while (i < n && (e = memmem(t + i, n - i, "endraw", 6)) != NULL) {
        i = (size_t)(e - t) + 6;
        while (i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '-'))
            i++;
        if (i + 1 < n && t[i] == '%' && t[i + 1] == '}')
            return i + 2;
    }
    return n;
}

/* Tokenize; false with a finding when the template does not lex (Jinja would refuse it). */
static bool lex(struct jx *j)
{
    const char *t = j->t, *p;
    size_t n = j->n, i = 0, k, depth;
    bool stmt;

    while (i < n) {
        p = memchr(t + i, '{', n - i);
        if (p == NULL)
            break;
        i = (size_t)(p - t);
        if (i + 1 >= n || (t[i + 1] != '{' && t[i + 1] != '%' && t[i + 1] != '#')) {
            i++;
            continue;
        }
        if (t[i + 1] == '#') {
            p = memmem(t + i + 2, n - i - 2, "#}", 2);
            if (p == NULL)
                goto unterminated;
            i = (size_t)(p - t) + 2;
            continue;
        }
        stmt = t[i + 1] == '%';
        if (!add(j, T_BEGIN, i, 2))
            goto cap;
        j->v[j->nv - 1].stmt = stmt;
        i += 2;
        if (i < n && (t[i] == '-' || t[i] == '+'))
            i++;
        depth = 0;
        for (;;) {
            while (i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r'))
                i++;
            if (i >= n)
                goto unterminated;
            k = i;
            if (depth == 0 && (t[i] == '-' || t[i] == '+') && i + 2 < n &&
                t[i + 1] == (stmt ? '%' : '}') && t[i + 2] == '}')
                i++;
            if (depth == 0 && i + 1 < n && t[i] == (stmt ? '%' : '}') && t[i + 1] == '}') {
                if (!add(j, T_END, k, i + 2 - k))
                    goto cap;
                i += 2;
                break;
            }
            i = k;
            if (name_start(t[i])) {
                while (i < n && name_char(t[i]))
                    i++;
                if (!add(j, T_NAME, k, i - k))
                    goto cap;
                /* {% raw %}: everything up to {% endraw %} is text */
                if (stmt && tok_is(j, &j->v[j->nv - 1], "raw") && j->v[j->nv - 2].type == T_BEGIN) {
                    j->nv -= 2;
                    i = skip_raw(t, n, i);
                    break;
                }
            } else if (t[i] >= '0' && t[i] <= '9') {
                while (i < n && (name_char(t[i]) || t[i] == '.'))
                    i++;
                if (!add(j, T_NUM, k, i - k))
                    goto cap;
            } else if (t[i] == '\'' || t[i] == '"') {
                char q = t[i++];
                while (i < n && t[i] != q)
                    i += t[i] == '\\' ? 2 : 1;
                if (i >= n)
                    goto unterminated;
                i++;
                if (!add(j, T_STR, k, i - k))
                    goto cap;
            } else {
                static const char *const two[] = {"==", "!=", "<=", ">=", "//", "**", NULL};
                size_t w = 1, x;
                for (x = 0; two[x]; x++) {
                    if (i + 1 < n && t[i] == two[x][0] && t[i + 1] == two[x][1])
                        w = 2;
                }
                if (strchr("([{", t[i]) != NULL)
                    depth++;
                else if (strchr(")]}", t[i]) != NULL && depth > 0)
                    depth--;
                if (strchr("()[]{},.:|~+-*/%=<>!", t[i]) == NULL) {
                    struct tok bad = {T_OP, 0, (uint32_t)i, 1};
                    finding(j, &bad, "jinja-syntax", false, "a character Jinja does not know");
                    return false;
                }
                if (!add(j, T_OP, i, w))
                    goto cap;
                i += w;
            }
        }
    }
    return true;
unterminated : {
    struct tok bad = {T_OP, 0, (uint32_t)(i < n ? i : n ? n - 1 : 0), 0};
    finding(j, &bad, "jinja-syntax", false, "an unterminated tag, comment or string");
    return false;
}
cap : {
    struct tok bad = {T_OP, 0, (uint32_t)i, 0};
    finding(j, &bad, "jinja-cap", false, "more tokens than the scanner's cap");
    return false;
}
}

/* ---- strings ------------------------------------------------------------------------- */

/* Decode a string token's escapes as Python does (enough to see underscores); false when
 * it holds an escape the scanner does not decode (\N{…}). */
static bool unescape(const struct jx *j, const struct tok *k, char *out, size_t cap, size_t *len)
{
    const char *s = j->t + k->off + 1;
    size_t n = k->len - 2, i, o = 0, d, w;
    unsigned long v;

    for (i = 0; i < n && o + 1 < cap; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            out[o++] = s[i];
            continue;
        }
        i++;
        w = s[i] == 'x' ? 2 : s[i] == 'u' ? 4 : s[i] == 'U' ? 8 : 0;
        if (s[i] == 'N')
            return false;
        if (w == 0 && s[i] >= '0' && s[i] <= '7') {
            for (v = 0, d = 0; d < 3 && i < n && s[i] >= '0' && s[i] <= '7'; d++, i++)
                v = v * 8 + (unsigned long)(s[i] - '0');
            i--;
            out[o++] = v < 0x80 ? (char)v : '?';
            continue;
        }
        if (w == 0) {
            out[o++] = s[i] == 'n' ? '\n' : s[i] == 't' ? '\t' : s[i];
            continue;
        }
        for (v = 0, d = 0; d < w && i + 1 < n; d++) {
            char c = s[++i];
            v = v * 16 + (unsigned long)(c >= 'a'   ? c - 'a' + 10
                                         : c >= 'A' ? c - 'A' + 10
                                                    : c - '0');
        }
        out[o++] = v < 0x80 ? (char)v : '?';
    }
    *len = o;
    return true;
}

/* ---- bindings ------------------------------------------------------------------------ */

static bool is_bound(const struct jx *j, const struct tok *k)
{
    size_t i;

    for (i = 0; i < j->nbound; i++) {
        if (j->bound[i]->len == k->len &&
            memcmp(j->t + j->bound[i]->off, j->t + k->off, k->len) == 0)
            return true;
    }
    return false;
}

static void bind(struct jx *j, const struct tok *k)
{
    const struct tok **nb;
    size_t nc;

    if (is_bound(j, k))
        return; /* each name once */
    if (j->nbound >= MAX_BOUND) {
        j->bound_full = true; /* the lookups would grow quadratically */
        return;
    }
    if (j->nbound == j->bound_cap) {
        nc = j->bound_cap ? j->bound_cap * 2 : 64;
        if ((nb = realloc(j->bound, nc * sizeof(*nb))) == NULL)
            return; /* then the name stays unknown: unsafe, never clean by mistake */
        j->bound = nb;
        j->bound_cap = nc;
    }
    j->bound[j->nbound++] = k;
}

/* What the template binds: set/for/with/macro/call targets, set ns.attr targets and
 * namespace(...) keyword names. */
static void collect(struct jx *j)
{
    size_t i, k;
    const struct tok *v = j->v;

    for (i = 0; i + 1 < j->nv; i++) {
        if (v[i].type == T_BEGIN && v[i].stmt && v[i + 1].type == T_NAME) {
            const struct tok *kw = &v[i + 1];
            bool set = tok_is(j, kw, "set") || tok_is(j, kw, "with");
            bool loop = tok_is(j, kw, "for");
            bool mac = tok_is(j, kw, "macro") || tok_is(j, kw, "call");
            for (k = i + 2; k < j->nv && v[k].type != T_END; k++) {
                if (loop && v[k].type == T_NAME && tok_is(j, &v[k], "in"))
                    break;
                if (set && is_op(j, &v[k], "="))
                    break;
                if (v[k].type != T_NAME)
                    continue;
                if (loop ||
                    (set && (k == i + 2 || is_op(j, &v[k - 1], ",") || is_op(j, &v[k - 1], "."))))
                    bind(j, &v[k]);
                else if (mac && (is_op(j, &v[k - 1], "(") || is_op(j, &v[k - 1], ",")) &&
                         k + 1 < j->nv &&
                         (is_op(j, &v[k + 1], ",") || is_op(j, &v[k + 1], ")") ||
                          is_op(j, &v[k + 1], "=")))
                    bind(j, &v[k]);
                else if (mac && k == i + 2)
                    bind(j, &v[k]);
            }
        }
        /* namespace(a=…, b=…) and any call's keyword argument names are attributes the
         * template may read back (ns.a). */
        if (v[i].type == T_NAME && is_op(j, &v[i + 1], "=") && i > 0 &&
            (is_op(j, &v[i - 1], "(") || is_op(j, &v[i - 1], ",")))
            bind(j, &v[i]);
    }
}

/* ---- the checks ---------------------------------------------------------------------- */

static bool dunder(const char *s, size_t n)
{
    return n >= 2 && memmem(s, n, "__", 2) != NULL;
}

static void check_string(struct jx *j, size_t i)
{
    const struct tok *k = &j->v[i];
    char *buf = malloc(k->len + 1);
    size_t len;
    bool key, ok;

    if (buf == NULL) {
        finding(j, k, "jinja-cap", false, "out of memory for a string");
        return;
    }
    ok = unescape(j, k, buf, k->len + 1, &len);
    if (ok && dunder(buf, len))
        ok = false;
    if (!ok) {
        free(buf);
        finding(j, k, "jinja-dunder", true, "a string naming a dunder or with a \\N{} escape");
        return;
    }
    key = i > 0 && is_op(j, &j->v[i - 1], "[") && i + 1 < j->nv && is_op(j, &j->v[i + 1], "]");
    if (!key && len > 0 && buf[0] == '_')
        finding(j, k, "jinja-dunder", true,
                "a string starting with '_' used to build a value (the start of a dunder)");
    /* Text computed from a literal: '%c%c' % (95, 95), 'a_'[1], 'x_'|last, 'a_'.split(…),
     * '_' * 2 make underscores the checks above never see. */
    else if (i + 1 < j->nv && (is_op(j, &j->v[i + 1], "%") || is_op(j, &j->v[i + 1], "*")))
        finding(j, k, "jinja-dunder", true, "a string formatted or repeated at render time");
    else if (i + 1 < j->nv && memchr(buf, '_', len) != NULL &&
             (is_op(j, &j->v[i + 1], "|") || is_op(j, &j->v[i + 1], "[") ||
              is_op(j, &j->v[i + 1], ".")))
        finding(j, k, "jinja-dunder", true,
                "a string holding '_' taken apart at render time (a dunder in the making)");
    free(buf);
    /* map('attr', …) / select('…'): a filter or test named by a string */
    if (i >= 2 && is_op(j, &j->v[i - 1], "(") && j->v[i - 2].type == T_NAME) {
        struct tok inner = {T_NAME, 0, k->off + 1, k->len - 2};
        if (tok_is(j, &j->v[i - 2], "map") && !in_list(j, &inner, filters_ok))
            finding(j, k, "jinja-filter", true, "map() applies a filter that is not allowed");
        if ((tok_is(j, &j->v[i - 2], "select") || tok_is(j, &j->v[i - 2], "reject")) &&
            !in_list(j, &inner, tests_ok))
            finding(j, k, "jinja-test", true, "select() applies a test that is not allowed");
    }
}

static void check_name(struct jx *j, size_t i, size_t tag_start, int paren)
{
    const struct tok *k = &j->v[i], *prev = i > 0 ? &j->v[i - 1] : NULL;
    const struct tok *next = i + 1 < j->nv ? &j->v[i + 1] : NULL;

    if (dunder(j->t + k->off, k->len)) {
        finding(j, k, "jinja-dunder", true, "a dunder name");
        return;
    }
    if (prev && is_op(j, prev, ".")) {
        if (j->t[k->off] == '_')
            finding(j, k, "jinja-attribute", true, "a private attribute");
        else if (!in_list(j, k, attrs_ok) && !is_bound(j, k))
            finding(j, k, "jinja-attribute", true, "an attribute chat templates do not use");
        return;
    }
    if (prev && is_op(j, prev, "|")) {
        if (tok_is(j, k, "attr"))
            finding(j, k, "jinja-attr-filter", true, "the attr filter (reads any attribute)");
        else if (!in_list(j, k, filters_ok))
            finding(j, k, "jinja-filter", true, "a filter chat templates do not use");
        return;
    }
    if (prev && prev->type == T_NAME && tok_is(j, prev, "is") && tok_is(j, k, "not"))
        return; /* "is not": the test follows */
    if (prev && prev->type == T_NAME &&
        (tok_is(j, prev, "is") ||
         (tok_is(j, prev, "not") && i >= 2 && tok_is(j, &j->v[i - 2], "is")))) {
        if (!in_list(j, k, tests_ok))
            finding(j, k, "jinja-test", true, "a test chat templates do not use");
        return;
    }
    if (i == tag_start + 1 && j->v[tag_start].stmt) {
        if (!in_list(j, k, stmts_ok))
            finding(j, k, "jinja-statement", true, "a statement chat templates do not use");
        return;
    }
    if (i == tag_start + 2 && j->v[tag_start].stmt && tok_is(j, prev, "filter")) {
        if (!in_list(j, k, filters_ok))
            finding(j, k, "jinja-filter", true, "a filter chat templates do not use");
        return;
    }
    if (paren > 0 && next && is_op(j, next, "="))
        return; /* a keyword argument */
    if (in_list(j, k, keywords) || in_list(j, k, globals_ok) || is_bound(j, k))
        return;
    finding(j, k, "jinja-global", true, "an unknown global");
}

void art_template_scan(const char *tpl, size_t n, const char *key, struct art_report *r)
{
    struct jx j;
    size_t i, tag = 0;
    int paren = 0;

    memset(&j, 0, sizeof(j));
    j.t = tpl;
    j.n = n;
    j.key = key;
    j.r = r;
    if (n > UINT32_MAX) {
        struct tok bad = {T_OP, 0, 0, 0};
        finding(&j, &bad, "jinja-cap", false, "a template larger than 4 GiB");
        return;
    }
    if (lex(&j)) {
        collect(&j);
        if (j.bound_full) {
            struct tok at = {T_OP, 0, 0, 0};
            finding(&j, &at, "jinja-cap", false, "more bindings (set, for, macro) than 512");
        }
        for (i = 0; !j.bound_full && i < j.nv; i++) {
            switch (j.v[i].type) {
            case T_BEGIN:
                tag = i;
                paren = 0;
                break;
            case T_OP:
                if (is_op(&j, &j.v[i], "(") || is_op(&j, &j.v[i], "["))
                    paren++;
                else if ((is_op(&j, &j.v[i], ")") || is_op(&j, &j.v[i], "]")) && paren > 0)
                    paren--;
                break;
            case T_STR:
                check_string(&j, i);
                break;
            case T_NAME:
                check_name(&j, i, tag, paren);
                break;
            default:
                break;
            }
        }
    }
    free(j.v);
    free(j.bound);
}
