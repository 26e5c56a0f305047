/*
 * markdown.c - Markdown to a JSON tree the web UI draws (markdown.h).
 */
#include "markdown.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmark.h>

int srv_markdown_url_ok(const char *url)
{
    static const char *const schemes[] = {"http:", "https:", "mailto:"};

    if (url == NULL)
        return 0;
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
        if (strncasecmp(url, schemes[i], strlen(schemes[i])) == 0)
            return 1;
    return 0;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 when it is not one. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    size_t len, i;
    unsigned cp;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        len = 2, cp = p[0] & 0x1f;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        len = 3, cp = p[0] & 0x0f;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        len = 4, cp = p[0] & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

/* A new JSON string of s, each byte that is not UTF-8 replaced by U+FFFD (cmark passes
 * them through from the Markdown); NULL when out of memory. */
static json_t *str(const char *s)
{
    size_t n = s ? strlen(s) : 0, i = 0, o = 0, k;
    char *clean;
    json_t *v;

    if (s == NULL)
        return json_string("");
    if ((v = json_stringn(s, n)) != NULL)
        return v;
    if (n > (SIZE_MAX - 1) / 3 || (clean = malloc(n * 3 + 1)) == NULL)
        return NULL;
    while (i < n) {
        if ((k = utf8_seq((const unsigned char *)s + i, n - i)) > 0 && s[i] != '\0') {
            memcpy(clean + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(clean + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    v = json_stringn(clean, o);
    free(clean);
    return v;
}

/* A new container node {"t":type,"c":[]} with its attributes; NULL when out of memory. */
static json_t *container(cmark_node *n)
{
    json_t *o = NULL;

    switch (cmark_node_get_type(n)) {
    case CMARK_NODE_DOCUMENT:
        o = json_pack("{s:s}", "t", "document");
        break;
    case CMARK_NODE_BLOCK_QUOTE:
        o = json_pack("{s:s}", "t", "block_quote");
        break;
    case CMARK_NODE_LIST: {
        bool ordered = cmark_node_get_list_type(n) == CMARK_ORDERED_LIST;

        o = json_pack("{s:s, s:b, s:i}", "t", "list", "ordered", ordered, "start",
                      ordered ? cmark_node_get_list_start(n) : 1);
        break;
    }
    case CMARK_NODE_ITEM:
        o = json_pack("{s:s}", "t", "item");
        break;
    case CMARK_NODE_PARAGRAPH:
        o = json_pack("{s:s}", "t", "paragraph");
        break;
    case CMARK_NODE_HEADING:
        o = json_pack("{s:s, s:i}", "t", "heading", "level", cmark_node_get_heading_level(n));
        break;
    case CMARK_NODE_EMPH:
        o = json_pack("{s:s}", "t", "emph");
        break;
    case CMARK_NODE_STRONG:
        o = json_pack("{s:s}", "t", "strong");
        break;
    case CMARK_NODE_LINK:
    case CMARK_NODE_IMAGE: {
        const char *url = cmark_node_get_url(n), *title = cmark_node_get_title(n);

        if (!srv_markdown_url_ok(url))
            o = json_pack("{s:s}", "t", "span");
        else
            o = json_pack("{s:s, s:o, s:o}", "t", "link", "href", str(url), "title", str(title));
        if (o != NULL && cmark_node_get_type(n) == CMARK_NODE_IMAGE &&
            json_object_set_new(o, "image", json_true()) != 0) {
            json_decref(o);
            o = NULL;
        }
        break;
    }
    default: /* custom blocks and inlines: their children, nothing of their own */
        o = json_pack("{s:s}", "t", "span");
        break;
    }
    if (o != NULL && json_object_set_new(o, "c", json_array()) != 0) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* A new leaf node, json_null() for one dropped (raw HTML), NULL when out of memory. */
static json_t *leaf(cmark_node *n)
{
    const char *lit = cmark_node_get_literal(n);

    switch (cmark_node_get_type(n)) {
    case CMARK_NODE_TEXT:
        return json_pack("{s:s, s:o}", "t", "text", "text", str(lit));
    case CMARK_NODE_CODE:
        return json_pack("{s:s, s:o}", "t", "code", "text", str(lit));
    case CMARK_NODE_CODE_BLOCK:
        return json_pack("{s:s, s:o, s:o}", "t", "code_block", "text", str(lit), "info",
                         str(cmark_node_get_fence_info(n)));
    case CMARK_NODE_SOFTBREAK:
        return json_pack("{s:s}", "t", "softbreak");
    case CMARK_NODE_LINEBREAK:
        return json_pack("{s:s}", "t", "linebreak");
    case CMARK_NODE_THEMATIC_BREAK:
        return json_pack("{s:s}", "t", "thematic_break");
    default: /* CMARK_NODE_HTML_BLOCK, CMARK_NODE_HTML_INLINE: raw HTML never survives */
        return json_null();
    }
}

static bool is_container(cmark_node *n)
{
    switch (cmark_node_get_type(n)) {
    case CMARK_NODE_DOCUMENT:
    case CMARK_NODE_BLOCK_QUOTE:
    case CMARK_NODE_LIST:
    case CMARK_NODE_ITEM:
    case CMARK_NODE_CUSTOM_BLOCK:
    case CMARK_NODE_PARAGRAPH:
    case CMARK_NODE_HEADING:
    case CMARK_NODE_EMPH:
    case CMARK_NODE_STRONG:
    case CMARK_NODE_LINK:
    case CMARK_NODE_IMAGE:
    case CMARK_NODE_CUSTOM_INLINE:
        return true;
    default:
        return false;
    }
}

json_t *srv_markdown_doc(const char *md, size_t len)
{
    /* stack[i]: the "c" array of the i-th open container (borrowed from root). */
    json_t *stack[SRV_MD_MAX_DEPTH], *root = NULL;
    int depth = 0, flat = 0; /* flat: containers entered past the cap, not in the tree */
    cmark_node *doc = cmark_parse_document(md, len, CMARK_OPT_DEFAULT);
    cmark_iter *it;
    cmark_event_type ev;
    bool ok = true;

    if (doc == NULL)
        return NULL;
    if ((it = cmark_iter_new(doc)) == NULL) {
        cmark_node_free(doc);
        return NULL;
    }
    while (ok && (ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
        cmark_node *n = cmark_iter_get_node(it);
        json_t *o;

        if (ev == CMARK_EVENT_EXIT) {
            if (flat > 0)
                flat--;
            else
                depth--;
            continue;
        }
        if (is_container(n)) {
            if (depth == SRV_MD_MAX_DEPTH) {
                flat++;
                continue;
            }
            if ((o = container(n)) == NULL) {
                ok = false;
                break;
            }
            if (depth == 0)
                root = o;
            else if (json_array_append_new(stack[depth - 1], o) != 0) {
                ok = false;
                break;
            }
            stack[depth++] = json_object_get(o, "c");
            continue;
        }
        if ((o = leaf(n)) == NULL) {
            ok = false;
            break;
        }
        if (json_is_null(o) || depth == 0)
            json_decref(o);
        else if (json_array_append_new(stack[depth - 1], o) != 0)
            ok = false;
    }
    cmark_iter_free(it);
    cmark_node_free(doc);
    if (!ok) {
        json_decref(root);
        return NULL;
    }
    return root;
}
