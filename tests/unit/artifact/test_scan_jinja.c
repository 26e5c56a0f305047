/*
 * test_scan_jinja.c - artifact/scan_jinja.c: the chat templates of widely used models
 * (tests/unit/artifact/templates/: ChatML, Llama 3 and 3.1 with tools, Mistral, Gemma,
 * Qwen with namespaces and reasoning) are clean; server-side template injection payloads
 * are unsafe, each naming the expression and its byte offset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "artifact/scan.h"

static char *slurp(const char *name, size_t *n)
{
    const char *src = getenv("MG_SOURCE_DIR");
    char path[4096];
    FILE *f;
    char *buf;
    long len;

    snprintf(path, sizeof(path), "%s/tests/unit/artifact/templates/%s", src ? src : ".", name);
    f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    len = ftell(f);
    assert_true(len > 0);
    rewind(f);
    buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    buf[len] = '\0';
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void expect(const char *tpl, size_t n, enum art_verdict v, const char *rule,
                   const char *want)
{
    json_t *f = json_array(), *e;
    enum art_verdict got = art_scan_template(tpl, n, NULL, f);
    size_t i;
    bool seen = rule == NULL;

    json_array_foreach(f, i, e)
    {
        const char *d = json_string_value(json_object_get(e, "detail"));
        if (rule && strcmp(json_string_value(json_object_get(e, "rule")), rule) == 0 &&
            (want == NULL || strstr(d, want)) && json_is_integer(json_object_get(e, "offset")))
            seen = true;
    }
    if (got != v || !seen) {
        char *dump = json_dumps(f, 0);
        fail_msg("template %.60s: verdict %s (wanted %s), findings %s (wanted %s '%s')", tpl,
                 art_verdict_name(got), art_verdict_name(v), dump ? dump : "?", rule ? rule : "",
                 want ? want : "");
    }
    json_decref(f);
}

#define T(s) (s), strlen(s)

static void test_real_templates_clean(void **state)
{
    static const char *const files[] = {"chatml.jinja",  "llama3.jinja", "llama31_tools.jinja",
                                        "mistral.jinja", "gemma.jinja",  "qwen.jinja"};
    size_t i, n;
    char *t;

    (void)state;
    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        t = slurp(files[i], &n);
        expect(t, n, ART_CLEAN, NULL, NULL);
        free(t);
    }
}

static void test_constructs_clean(void **state)
{
    (void)state;
    expect(T("{% macro render(msg, prefix='') %}{{ prefix ~ msg.content }}{% endmacro %}"
             "{% for m in messages %}{{ render(m, prefix='> ') }}{% endfor %}"),
           ART_CLEAN, NULL, NULL);
    expect(T("{% raw %}{{ ''.__class__ }}{% endraw %}{# {{ x.__y__ }} #}{{ bos_token }}"),
           ART_CLEAN, NULL, NULL);
    expect(T("{% for k, v in tools[0].function.parameters.properties | dictsort %}{{ k }}: "
             "{{ v.type | default('string') }}{% endfor %}"
             "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') "
             "| list | length }}{% generation %}{{ eos_token }}{% endgeneration %}"),
           ART_CLEAN, NULL, NULL);
}

static void test_ssti_unsafe(void **state)
{
    (void)state;
    expect(T("{{ cycler.__init__.__globals__.os.popen('id').read() }}"), ART_UNSAFE, "jinja-dunder",
           "__init__");
    expect(T("hello {{ ''|attr('__class__') }}"), ART_UNSAFE, "jinja-attr-filter", "at byte 12");
    expect(T("{{ messages|attr('x') }}"), ART_UNSAFE, "jinja-attr-filter", "messages|attr");
    expect(T("{{ self._TemplateReference__context }}"), ART_UNSAFE, "jinja-dunder", NULL);
    expect(T("{{ lipsum['__globals__'] }}"), ART_UNSAFE, "jinja-dunder", NULL);
    expect(T("{{ ''['\\x5f\\x5fclass\\x5f\\x5f'] }}"), ART_UNSAFE, "jinja-dunder", NULL);
    expect(T("{{ ''['_' ~ '_class_' ~ '_'] }}"), ART_UNSAFE, "jinja-dunder", "starting with '_'");
    expect(T("{% set u = '_' %}{{ ''[u ~ u ~ 'class' ~ u ~ u] }}"), ART_UNSAFE, "jinja-dunder",
           "starting with '_'");
    expect(T("{% for m in messages %}{{ 'call_' ~ loop.index }}{{ m['_id'] }}{% endfor %}"),
           ART_CLEAN, NULL, NULL);
    expect(T("{{ ''[('%c%cclass%c%c' % (95, 95, 95, 95))] }}"), ART_UNSAFE, "jinja-dunder",
           "formatted");
    expect(T("{{ ''[('a_'[1] ~ 'a_'[1] ~ 'class')] }}"), ART_UNSAFE, "jinja-dunder", "taken apart");
    expect(T("{{ ''[('x_'|last) * 2 ~ 'class'] }}"), ART_UNSAFE, "jinja-dunder", "taken apart");
    expect(T("{% include 'other.jinja' %}"), ART_UNSAFE, "jinja-statement", "include");
    expect(T("{% import 'os' as os %}"), ART_UNSAFE, "jinja-statement", NULL);
    expect(T("{{ messages|map('attr', 'x')|list }}"), ART_UNSAFE, "jinja-filter", "map()");
    expect(T("{{ joiner() }}"), ART_UNSAFE, "jinja-global", "joiner");
    expect(T("{{ config.items() }}"), ART_UNSAFE, "jinja-global", "config");
    expect(T("{{ request.application }}"), ART_UNSAFE, "jinja-global", "request");
    expect(T("{{ ''.mro() }}"), ART_UNSAFE, "jinja-attribute", "mro");
    expect(T("{{ x._private }}{% set x = 1 %}"), ART_UNSAFE, "jinja-attribute", NULL);
    expect(T("{{ '%c%c'|format(95, 95) }}"), ART_UNSAFE, "jinja-filter", "format");
    expect(T("{{ messages[0] is callable }}"), ART_UNSAFE, "jinja-test", "callable");
    expect(T("{{ bos_token }}{{ x "), ART_UNKNOWN, "jinja-syntax", NULL);
    expect(T("{{ 'abc }}"), ART_UNKNOWN, "jinja-syntax", NULL);
    {
        /* more bindings than the cap: each name would be looked up among all of them */
        char *t = malloc(600 * 24 + 1);
        size_t n = 0, i;
        assert_non_null(t);
        for (i = 0; i < 600; i++)
            n += (size_t)sprintf(t + n, "{%% set v%zu = 1 %%}", i);
        expect(t, n, ART_UNKNOWN, "jinja-cap", "512");
        free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_templates_clean),
        cmocka_unit_test(test_constructs_clean),
        cmocka_unit_test(test_ssti_unsafe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
