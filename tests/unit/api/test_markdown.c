/*
 * test_markdown.c - model cards as node trees (server/markdown.c): what survives, what is
 * dropped, and that no input nests deeper than SRV_MD_MAX_DEPTH.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/markdown.h"

/* The tree as compact JSON (caller frees). */
static char *doc_text(const char *md)
{
    json_t *doc = srv_markdown_doc(md, strlen(md));
    char *text;

    assert_non_null(doc);
    text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(doc);
    assert_non_null(text);
    return text;
}

static int depth(const json_t *n)
{
    const json_t *k;
    size_t i;
    int best = 0;

    json_array_foreach(json_object_get(n, "c"), i, k)
    {
        int d = depth(k);

        best = d > best ? d : best;
    }
    return best + 1;
}

static void test_urls(void **state)
{
    static const struct {
        const char *url;
        int ok;
    } cases[] = {
        {"https://example.com/x", 1},
        {"HTTP://EXAMPLE.COM", 1},
        {"mailto:a@example.com", 1},
        {"MailTo:a@example.com", 1},
        {"javascript:alert(1)", 0},
        {"JaVaScRiPt:alert(1)", 0},
        {" javascript:alert(1)", 0},
        {"data:text/html,<script>", 0},
        {"vbscript:msgbox", 0},
        {"/relative/path", 0},
        {"#anchor", 0},
        {"//evil.example/x", 0},
        {"file:///etc/passwd", 0},
        {"", 0},
        {"http", 0},
        {NULL, 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (srv_markdown_url_ok(cases[i].url) != cases[i].ok)
            fail_msg("srv_markdown_url_ok(%s) should be %d", cases[i].url ? cases[i].url : "NULL",
                     cases[i].ok);
}

static void test_trees(void **state)
{
    static const struct {
        const char *md;
        const char *has;     /* must appear in the compact JSON */
        const char *has_not; /* must not (NULL: no check) */
    } cases[] = {
        {"# Title", "{\"c\":[{\"t\":\"text\",\"text\":\"Title\"}],\"level\":1,\"t\":\"heading\"}",
         NULL},
        {"*a* **b** `c`", "\"t\":\"emph\"", NULL},
        {"*a* **b** `c`", "{\"t\":\"code\",\"text\":\"c\"}", NULL},
        {"[x](https://e.example \"T\")",
         "{\"c\":[{\"t\":\"text\",\"text\":\"x\"}],\"href\":\"https://e.example\",\"t\":\"link\","
         "\"title\":\"T\"}",
         NULL},
        {"[x](javascript:alert(1))", "{\"c\":[{\"t\":\"text\",\"text\":\"x\"}],\"t\":\"span\"}",
         "javascript"},
        {"[x](data:text/html;base64,AAAA)", "\"t\":\"span\"", "data:"},
        {"![alt](https://img.example/a.png)", "\"image\":true", NULL},
        {"![alt](data:image/png;base64,AAAA)", "\"text\":\"alt\"", "data:"},
        {"<script>alert(1)</script>", "\"t\":\"document\"", "script"},
        {"a <img src=x onerror=alert(1)> b", "\"text\":\"a \"", "onerror"},
        {"<a href=\"javascript:x\">y</a>", "\"text\":\"y\"", "javascript"},
        {"```js\n<b>x</b>\n```", "{\"info\":\"js\",\"t\":\"code_block\",\"text\":\"<b>x</b>\\n\"}",
         NULL},
        {"3. a\n4. b", "\"ordered\":true,\"start\":3", NULL},
        {"- a\n- b", "\"ordered\":false", NULL},
        {"> q", "\"t\":\"block_quote\"", NULL},
        {"a  \nb", "\"t\":\"linebreak\"", NULL},
        {"---", "\"t\":\"thematic_break\"", NULL},
        {"", "{\"c\":[],\"t\":\"document\"}", NULL},
        {"<https://auto.example>", "\"href\":\"https://auto.example\"", NULL},
        /* bytes that are not UTF-8 (cmark passes them through) become U+FFFD */
        {"[x](https://a.\xe5x) \xff", "\"href\":\"https://a.\xef\xbf\xbdx\"", "\xff"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = doc_text(cases[i].md);

        if (strstr(text, cases[i].has) == NULL)
            fail_msg("case %zu (%s): %s lacks %s", i, cases[i].md, text, cases[i].has);
        if (cases[i].has_not && strstr(text, cases[i].has_not) != NULL)
            fail_msg("case %zu (%s): %s holds %s", i, cases[i].md, text, cases[i].has_not);
        free(text);
    }
}

/* Deep nesting of every kind is flattened, its text kept. */
static void test_depth_cap(void **state)
{
    static const char unit[][4] = {">", "- ", "*"};
    const size_t n = 20000;

    (void)state;
    for (size_t u = 0; u < sizeof(unit) / sizeof(unit[0]); u++) {
        size_t ul = strlen(unit[u]);
        char *md = malloc(n * ul * 2 + 8);
        json_t *doc;
        char *text;
        size_t len = 0;

        assert_non_null(md);
        for (size_t i = 0; i < n; i++, len += ul)
            memcpy(md + len, unit[u], ul);
        memcpy(md + len, "deep", 4);
        len += 4;
        if (u == 2) /* closing stars for the emphasis */
            for (size_t i = 0; i < n; i++)
                md[len++] = '*';
        md[len] = '\0';
        doc = srv_markdown_doc(md, len);
        assert_non_null(doc);
        assert_true(depth(doc) <= SRV_MD_MAX_DEPTH + 1);
        text = json_dumps(doc, JSON_COMPACT);
        assert_non_null(text);
        assert_non_null(strstr(text, "deep"));
        free(text);
        json_decref(doc);
        free(md);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_trees),
        cmocka_unit_test(test_depth_cap),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
