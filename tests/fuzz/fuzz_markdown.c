/*
 * fuzz_markdown.c - model cards (PATCH /api/v1/models/{model} "readme") through
 * srv_markdown_doc(), the tree GET /api/v1/models/{model}/readme sends to the UI.
 *
 * Input: the Markdown itself, at most 64 KiB as the API allows.
 *
 * Checked besides memory safety:
 * - a tree always comes back, rooted at a document;
 * - it nests at most SRV_MD_MAX_DEPTH containers deep;
 * - every node has a known type, and only "link" carries an href, which
 *   srv_markdown_url_ok() accepts (http:, https:, mailto:);
 * - it dumps to JSON and back to the same tree (what the UI parses is what was built).
 */
#include "fuzz.h"

#include "api/markdown.h"

#define README_MAX 65536

static const char *const TYPES[] = {
    "document",   "paragraph", "heading",   "block_quote",    "list", "item",
    "emph",       "strong",    "link",      "span",           "text", "code",
    "code_block", "softbreak", "linebreak", "thematic_break", NULL,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void check(const json_t *n, int depth)
{
    const char *t = json_string_value(json_object_get(n, "t"));
    const json_t *href = json_object_get(n, "href"), *c = json_object_get(n, "c"), *k;
    size_t i, j;

    FUZZ_CHECK(depth <= SRV_MD_MAX_DEPTH + 1, "nested %d deep", depth);
    FUZZ_CHECK(t != NULL, "a node without a type");
    for (j = 0; TYPES[j] != NULL && strcmp(TYPES[j], t) != 0; j++)
        ;
    FUZZ_CHECK(TYPES[j] != NULL, "unknown node type %s", t);
    if (href != NULL) {
        FUZZ_CHECK(strcmp(t, "link") == 0, "a %s with an href", t);
        FUZZ_CHECK(srv_markdown_url_ok(json_string_value(href)), "unsafe href %s",
                   json_string_value(href));
    }
    json_array_foreach(c, i, k) check(k, depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc, *back;
    char *text;

    if (size > README_MAX)
        return 0;
    doc = srv_markdown_doc((const char *)data, size);
    FUZZ_CHECK(doc != NULL, "no tree for %zu bytes", size);
    FUZZ_CHECK(strcmp(json_string_value(json_object_get(doc, "t")), "document") == 0,
               "the root is not a document");
    check(doc, 1);
    text = json_dumps(doc, JSON_COMPACT);
    FUZZ_CHECK(text != NULL, "the tree does not dump");
    back = json_loads(text, 0, NULL);
    FUZZ_CHECK(back != NULL && json_equal(back, doc), "the tree does not read back");
    json_decref(back);
    free(text);
    json_decref(doc);
    return 0;
}
