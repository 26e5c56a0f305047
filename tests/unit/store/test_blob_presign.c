/*
 * test_blob_presign.c - store/blob_presign.c: SigV4 query presigning against the worked
 * example of AWS's "Authenticating Requests: Using Query Parameters (AWS Signature
 * Version 4)" (GET examplebucket/test.txt, 2013-05-24, 86400 s), the parameter order with a
 * session token, and the percent-encoding rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "store/blob.h"

static void test_aws_example(void **state)
{
    struct blob_sigv4 s = {
        .access_key = "AKIAIOSFODNN7EXAMPLE",
        .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        .region = "us-east-1",
        .host = "examplebucket.s3.amazonaws.com",
        .path = "/test.txt",
        .amz_date = "20130524T000000Z",
        .expires_s = 86400,
    };
    char *q = blob_sigv4_presign_query(&s);

    (void)state;
    assert_non_null(q);
    assert_string_equal(
        q, "X-Amz-Algorithm=AWS4-HMAC-SHA256"
           "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
           "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
           "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
    free(q);
}

static void test_session_token_and_changes(void **state)
{
    struct blob_sigv4 s = {
        .access_key = "AKIAIOSFODNN7EXAMPLE",
        .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        .session_token = "tok/en+=",
        .region = "us-east-1",
        .host = "examplebucket.s3.amazonaws.com",
        .path = "/test.txt",
        .amz_date = "20130524T000000Z",
        .expires_s = 300,
    };
    char *a = blob_sigv4_presign_query(&s), *b;

    (void)state;
    assert_non_null(a);
    /* sorted: ...X-Amz-Expires, X-Amz-Security-Token, X-Amz-SignedHeaders, signature */
    assert_non_null(strstr(a, "&X-Amz-Expires=300&X-Amz-Security-Token=tok%2Fen%2B%3D"
                              "&X-Amz-SignedHeaders=host&X-Amz-Signature="));
    s.path = "/test.txu"; /* any change of what is signed changes the signature */
    b = blob_sigv4_presign_query(&s);
    assert_non_null(b);
    assert_string_not_equal(strstr(a, "Signature="), strstr(b, "Signature="));
    free(a);
    free(b);
    s.amz_date = "2013";
    assert_null(blob_sigv4_presign_query(&s));
}

static void test_encode(void **state)
{
    char *e;

    (void)state;
    e = blob_sigv4_encode("a b/c~d_e-f.g*h%", false);
    assert_string_equal(e, "a%20b%2Fc~d_e-f.g%2Ah%25");
    free(e);
    e = blob_sigv4_encode("pre fix/sha256/ab", true);
    assert_string_equal(e, "pre%20fix/sha256/ab");
    free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aws_example),
        cmocka_unit_test(test_session_token_and_changes),
        cmocka_unit_test(test_encode),
    };

    return cmocka_run_group_tests_name("unit_store_blob_presign", tests, NULL, NULL);
}
