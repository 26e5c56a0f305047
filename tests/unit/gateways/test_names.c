/*
 * test_names.c - the names gateways derive (server/push/names.c): the nginx
 * variable is one-to-one (the colliding pairs of issue M18 get different
 * names; random names decode back to what was encoded), and template names
 * carry the owner the store's collision check compares.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateways/push.h"

static void test_variable_table(void **state)
{
    static const char *const cases[][3] = {
        {"fraud", "production", "modelgate_fraud_production"},
        {"fraud-x", "production", "modelgate_fraud_0x_production"},
        {"fraud.x", "production", "modelgate_fraud_1x_production"},
        {"fraud", "x-production", "modelgate_fraud_x_0production"},
        {"fraud_x", "production", "modelgate_fraud_2x_production"},
        {"fraud.eu-west", "production", "modelgate_fraud_1eu_0west_production"},
        {"0", "a", "modelgate_0_a"},
        {"a-", "b", "modelgate_a_0_b"},
    };
    char got[256];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_true(push_nginx_variable(cases[i][0], cases[i][1], got, sizeof(got)));
        assert_string_equal(got, cases[i][2]);
    }
    /* The three names that shared $modelgate_fraud_x_production before. */
    char a[256], b[256], c[256];
    assert_true(push_nginx_variable("fraud-x", "production", a, sizeof(a)));
    assert_true(push_nginx_variable("fraud.x", "production", b, sizeof(b)));
    assert_true(push_nginx_variable("fraud", "x-production", c, sizeof(c)));
    assert_string_not_equal(a, b);
    assert_string_not_equal(a, c);
    assert_string_not_equal(b, c);
}

static void test_encode_limits(void **state)
{
    char small[8], big[256];
    char model[64];

    (void)state;
    assert_false(push_name_encode("abcdefgh", small, sizeof(small)));
    assert_true(push_name_encode("abcdefg", small, sizeof(small)));
    assert_false(push_name_encode("abcdef-", small, sizeof(small))); /* "abcdef_0" is 8 */
    assert_false(push_name_encode("a/b", big, sizeof(big)));
    assert_false(push_name_encode("A", big, sizeof(big)));
    /* The longest names, every character escaped, fit the variable. */
    memset(model, '-', 63);
    model[0] = 'a';
    model[63] = '\0';
    assert_true(push_nginx_variable(model, "a-------------------------------", big, sizeof(big)));
    assert_false(push_nginx_variable("fraud", "production", big, 20));
}

/* Decode one encoded name from *p up to the separator ("_" + a letter) or
 * the end; false on anything the encoder never writes. */
static bool decode(const char **p, bool stop_at_separator, char *out, size_t n)
{
    size_t k = 0;
    const char *s = *p;

    while (*s) {
        char c;
        if (*s == '_') {
            if (s[1] >= 'a' && s[1] <= 'z' && stop_at_separator)
                break;
            if (s[1] == '0')
                c = '-';
            else if (s[1] == '1')
                c = '.';
            else if (s[1] == '2')
                c = '_';
            else
                return false;
            s += 2;
        } else if ((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')) {
            c = *s++;
        } else {
            return false;
        }
        if (k + 1 >= n)
            return false;
        out[k++] = c;
    }
    out[k] = '\0';
    *p = s;
    return true;
}

static void random_name(char *out, size_t maxlen, const char *first, const char *rest)
{
    size_t n = 1 + (size_t)rand() % maxlen, i;

    out[0] = first[(size_t)rand() % strlen(first)];
    for (i = 1; i < n; i++)
        out[i] = rest[(size_t)rand() % strlen(rest)];
    out[n] = '\0';
}

static void test_random_names_decode_back(void **state)
{
    /* Few letters and many escapes: collisions would show quickly. */
    static const char mfirst[] = "ab0", mrest[] = "ab0_-.", afirst[] = "ab", arest[] = "ab0-";
    char model[64], alias[33], var[256], m2[64], a2[33];

    (void)state;
    srand(18);
    for (int i = 0; i < 200000; i++) {
        const char *p;

        random_name(model, i % 2 ? 6 : 63, mfirst, mrest);
        random_name(alias, i % 2 ? 4 : 32, afirst, arest);
        assert_true(push_nginx_variable(model, alias, var, sizeof(var)));
        assert_memory_equal(var, "modelgate_", 10);
        p = var + 10;
        assert_true(decode(&p, true, m2, sizeof(m2)));
        assert_true(*p == '_');
        p++;
        assert_true(decode(&p, false, a2, sizeof(a2)));
        assert_true(*p == '\0');
        if (strcmp(model, m2) != 0 || strcmp(alias, a2) != 0)
            fail_msg("%s/%s encodes to %s, which decodes to %s/%s", model, alias, var, m2, a2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variable_table),
        cmocka_unit_test(test_encode_limits),
        cmocka_unit_test(test_random_names_decode_back),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
