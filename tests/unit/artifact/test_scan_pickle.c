/*
 * test_scan_pickle.c - artifact/scan_pickle.c: hand-assembled pickles, one for each
 * published bypass class of pickle scanners (names built through the memo, STACK_GLOBAL
 * over computed strings, getattr/__import__ chains, protocol 0 INST, __builtin__
 * spellings, copyreg and its extension registry, nested pickles, truncated streams), and
 * the data-only pickles that must stay clean.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "artifact/scan.h"

#define P(s) (s), sizeof(s) - 1

/* The verdict, and (when want is not NULL) a finding whose detail holds `want`. */
static void expect(const char *pk, size_t n, enum art_verdict v, const char *rule, const char *want)
{
    json_t *f = json_array(), *e;
    enum art_verdict got = art_scan_pickle(pk, n, NULL, f);
    size_t i;
    bool seen = want == NULL;

    json_array_foreach(f, i, e)
    {
        const char *d = json_string_value(json_object_get(e, "detail"));
        if (want && strstr(d, want) &&
            (rule == NULL || strcmp(json_string_value(json_object_get(e, "rule")), rule) == 0))
            seen = true;
    }
    if (got != v || !seen) {
        char *dump = json_dumps(f, 0);
        fail_msg("verdict %s (wanted %s), findings %s (wanted '%s')", art_verdict_name(got),
                 art_verdict_name(v), dump ? dump : "?", want ? want : "");
    }
    json_decref(f);
}

static void test_clean_data(void **state)
{
    (void)state;
    /* protocol 2: {'a': 1, 'b': [1.5, None, True]} */
    expect(P("\x80\x02}q\x00(X\x01\x00\x00\x00"
             "aq\x01K\x01X\x01\x00\x00\x00"
             "bq\x02]q\x03"
             "(G?\xf8\x00\x00\x00\x00\x00\x00N\x88"
             "eu."),
           ART_CLEAN, NULL, NULL);
    /* protocol 0: (dp0\nS'x'\np1\nI1\ns. */
    expect(P("(dp0\nS'x'\np1\nI1\ns."), ART_CLEAN, NULL, NULL);
    /* protocol 4 with a frame and memoize: OrderedDict() via STACK_GLOBAL of constants */
    expect(P("\x80\x04\x95\x1f\x00\x00\x00\x00\x00\x00\x00\x8c\x0b"
             "collections\x94\x8c\x0bOrderedDict\x94\x93\x94)R\x94."),
           ART_CLEAN, NULL, NULL);
    /* a torch state dict entry: _rebuild_tensor_v2(persistent storage, 0, (2,), (1,),
     * False, OrderedDict()) */
    expect(P("\x80\x02\x63torch._utils\n_rebuild_tensor_v2\nq\x00((X\x07\x00\x00\x00storageq"
             "\x01\x63torch\nFloatStorage\nq\x02X\x01\x00\x00\x00"
             "0X\x03\x00\x00\x00"
             "cpuK\x02tQ"
             "K\x00K\x02\x85K\x01\x85\x89\x63\x63ollections\nOrderedDict\n)Rtq\x03Rq\x04."),
           ART_CLEAN, NULL, NULL);
    /* __builtin__.set is builtins.set for a protocol 2 unpickler */
    expect(P("\x80\x02\x63__builtin__\nset\n]\x85R."), ART_CLEAN, NULL, NULL);
}

static void test_global_reduce(void **state)
{
    (void)state;
    expect(P("cos\nsystem\n(S'id'\ntR."), ART_UNSAFE, "pickle-import", "os.system");
    expect(P("cposix\nsystem\n(S'id'\ntR."), ART_UNSAFE, "pickle-import", "posix.system");
    expect(P("\x80\x02\x63subprocess\nPopen\n]\x85R."), ART_UNSAFE, NULL, "subprocess.Popen");
    /* the import alone is refused, called or not (importing runs a module's code) */
    expect(P("\x80\x02\x63os\nsystem\n."), ART_UNSAFE, NULL, "os.system");
}

static void test_names_through_memo(void **state)
{
    (void)state;
    /* "os" and "system" are PUT, popped, fetched back with GET and fed to STACK_GLOBAL */
    expect(P("\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x30\x30h\x00h\x01\x93\x8c\x02id\x85R."),
           ART_UNSAFE, "pickle-import", "os.system");
    /* the same with LONG_BINPUT / LONG_BINGET and protocol 0 PUT/GET */
    expect(P("\x80\x04\x8c\x02osr\x07\x00\x00\x00\x30\x8c\x06systemp9\n\x30"
             "j\x07\x00\x00\x00g9\n\x93."),
           ART_UNSAFE, "pickle-import", "os.system");
    /* memoized allowed names stay allowed */
    expect(P("\x80\x04\x8c\x0b\x63ollections\x94\x8c\x0bOrderedDict\x94\x30\x30h\x00h\x01\x93)R."),
           ART_CLEAN, NULL, NULL);
}

static void test_stack_global_computed(void **state)
{
    (void)state;
    /* the module name comes out of an (allowed) call: _codecs.encode('os', 'latin1') */
    expect(P("\x80\x04\x8c\x07_codecs\x8c\x06\x65ncode\x93\x8c\x02os\x8c\x06latin1\x86R"
             "\x8c\x06system\x93."),
           ART_UNSAFE, "pickle-computed-import", "not a constant string");
    /* a name that is bytes, or a tuple */
    expect(P("\x80\x04\x43\x02os\x8c\x06system\x93."), ART_UNSAFE, "pickle-computed-import", NULL);
    expect(P("\x80\x04\x8c\x02os)\x93."), ART_UNSAFE, "pickle-computed-import", NULL);
}

static void test_getattr_import_chains(void **state)
{
    (void)state;
    expect(P("c__builtin__\ngetattr\n(c__builtin__\ndict\nS'get'\ntR."), ART_UNSAFE, NULL,
           "builtins.getattr (written __builtin__.getattr)");
    expect(P("\x80\x04\x8c\x08\x62uiltins\x8c\n__import__\x93\x8c\x02os\x85R."), ART_UNSAFE, NULL,
           "builtins.__import__");
    /* protocol 4 dotted names walk attributes: an allowed module, a dunder path */
    expect(P("\x80\x04\x8c\x0ctorch._utils\x8c\x1e_rebuild_tensor.__globals__.os\x93."), ART_UNSAFE,
           NULL, "torch._utils._rebuild_tensor.__globals__.os");
    expect(P("cbuiltins\neval\n(S'1'\ntR."), ART_UNSAFE, NULL, "builtins.eval");
    expect(P("c__builtin__\nexec\n(S'1'\ntR."), ART_UNSAFE, NULL, "written __builtin__.exec");
}

static void test_inst_and_obj(void **state)
{
    (void)state;
    /* protocol 0 INST: import and call in one opcode */
    expect(P("(S'id'\nios\nsystem\n."), ART_UNSAFE, "pickle-import", "os.system");
    /* OBJ with a refused class */
    expect(P("(cos\nsystem\nS'id'\no."), ART_UNSAFE, "pickle-import", "os.system");
    /* calling something that is not an imported name */
    expect(P("\x80\x02}]\x85R."), ART_UNSAFE, "pickle-call", NULL);
    expect(P("\x80\x02}]\x81."), ART_UNSAFE, "pickle-call", NULL);
}

static void test_copyreg(void **state)
{
    (void)state;
    expect(P("ccopy_reg\n_reconstructor\n(c__builtin__\nobject\nNNtR."), ART_UNSAFE, NULL,
           "copyreg._reconstructor (written copy_reg._reconstructor)");
    expect(P("\x80\x02\x82\x01)R."), ART_UNSAFE, "pickle-extension", "EXT1");
    expect(P("\x80\x02\x84\x01\x00\x00\x00."), ART_UNSAFE, "pickle-extension", "EXT4");
}

static void test_nested(void **state)
{
    (void)state;
    /* a pickle that unpickles bytes it carries */
    expect(P("\x80\x03\x63pickle\nloads\nC\x0c\x63os\nsystem\n.\x85R."), ART_UNSAFE, NULL,
           "pickle.loads");
    expect(P("\x80\x03\x63_pickle\nloads\n]\x85R."), ART_UNSAFE, NULL, "_pickle.loads");
    expect(P("\x80\x03\x63torch\nload\n]\x85R."), ART_UNSAFE, NULL, "torch.load");
    /* a clean pickle followed by a second one: a second pickle.load() runs it */
    expect(P("\x80\x02K\x01.\x80\x02\x63os\nsystem\n."), ART_UNSAFE, NULL, "os.system");
}

static void test_malformed_is_unknown(void **state)
{
    static const char ok[] = "\x80\x02}q\x00(X\x01\x00\x00\x00"
                             "aq\x01K\x01u.";
    size_t i;

    (void)state;
    /* every truncation of a clean pickle is unknown, never clean */
    for (i = 0; i + 1 < sizeof(ok) - 1; i++)
        expect(ok, i, ART_UNKNOWN, NULL, NULL);
    expect(P("\x80\x02\xff."), ART_UNKNOWN, "pickle-opcode", "0xff");
    expect(P("\x80\x06N."), ART_UNKNOWN, "pickle-opcode", NULL);
    expect(P("\x80\x02h\x05."), ART_UNKNOWN, "pickle-malformed", "never PUT");
    expect(P("\x80\x02R."), ART_UNKNOWN, "pickle-malformed", NULL);
    expect(P("\x80\x02t."), ART_UNKNOWN, "pickle-malformed", "MARK");
    expect(P("\x80\x02X\xff\xff\xff\x00"
             "ab."),
           ART_UNKNOWN, "pickle-malformed", NULL);
    expect(P("Ix1\n."), ART_UNKNOWN, "pickle-malformed", NULL);
    /* unsafe before the damage stays unsafe: Python ran it before failing */
    expect(P("cos\nsystem\n(S'id'\ntR\xff"), ART_UNSAFE, "pickle-import", "os.system");
}

static void test_scan_allow(void **state)
{
    const char *allow[] = {"mypkg.config.Config"};
    struct art_scan_opts o;
    static const char pk[] = "\x80\x02\x63mypkg.config\nConfig\n)\x81}b.";

    (void)state;
    art_scan_opts_default(&o);
    expect(P(pk), ART_UNSAFE, NULL, "mypkg.config.Config");
    o.allow = allow;
    o.n_allow = 1;
    assert_int_equal(art_scan_pickle(pk, sizeof(pk) - 1, &o, NULL), ART_CLEAN);
    assert_true(art_scan_allowed("torch._utils._rebuild_tensor_v2", NULL));
    assert_false(art_scan_allowed("torch.load", NULL));
}

/* Found by fuzz_pickle: a name that is not UTF-8 still makes a finding (it was dropped, as
 * JSON cannot hold it); a protocol 0 number longer than the kept line is read safely. */
static void test_fuzz_regressions(void **state)
{
    char pk[700];
    size_t n = 0;

    (void)state;
    expect(P("c\xff\xfeos\nsystem\n."), ART_UNSAFE, "pickle-import", "??os.system");
    pk[n++] = 'I';
    memset(pk + n, '7', 600);
    n += 600;
    memcpy(pk + n, "\n.", 2);
    n += 2;
    expect(pk, n, ART_CLEAN, NULL, NULL);
    pk[0] = 'F';
    pk[300] = 'x';
    expect(pk, n, ART_UNKNOWN, "pickle-malformed", "FLOAT");
}

static void test_caps(void **state)
{
    struct art_scan_opts o;
    char pk[64];
    size_t n = 0, i;

    (void)state;
    art_scan_opts_default(&o);
    o.max_pickle_stack = 4;
    pk[n++] = (char)0x80;
    pk[n++] = 2;
    for (i = 0; i < 8; i++)
        pk[n++] = 'N';
    pk[n++] = '.';
    assert_int_equal(art_scan_pickle(pk, n, &o, NULL), ART_UNKNOWN);
    o.max_pickle_stack = 1000;
    o.max_pickle_memo = 2;
    assert_int_equal(art_scan_pickle(P("\x80\x02Nq\x05."), &o, NULL), ART_UNKNOWN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_data),
        cmocka_unit_test(test_global_reduce),
        cmocka_unit_test(test_names_through_memo),
        cmocka_unit_test(test_stack_global_computed),
        cmocka_unit_test(test_getattr_import_chains),
        cmocka_unit_test(test_inst_and_obj),
        cmocka_unit_test(test_copyreg),
        cmocka_unit_test(test_nested),
        cmocka_unit_test(test_malformed_is_unknown),
        cmocka_unit_test(test_scan_allow),
        cmocka_unit_test(test_fuzz_regressions),
        cmocka_unit_test(test_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
