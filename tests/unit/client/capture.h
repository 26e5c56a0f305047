/*
 * capture.h - what the CLI prints, read back by the client's unit tests: stdout or stderr
 * goes to an unlinked temporary file between capture_begin() and capture_end().
 *
 * Include after <cmocka.h>. Keep assertions outside a capture: a failing one would leave the
 * stream redirected.
 */
#ifndef MG_TEST_CAPTURE_H
#define MG_TEST_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct capture {
    FILE *stream; /* stdout or stderr */
    FILE *tmp;
    int saved; /* the stream's own descriptor, dup'ed */
};

static inline void capture_begin(struct capture *c, FILE *stream)
{
    c->stream = stream;
    fflush(stream);
    c->tmp = tmpfile();
    assert_non_null(c->tmp);
    c->saved = dup(fileno(stream));
    assert_true(c->saved >= 0);
    assert_true(dup2(fileno(c->tmp), fileno(stream)) >= 0);
}

/* What was written meanwhile (malloc'd, NUL-terminated); the stream is restored. */
static inline char *capture_end(struct capture *c)
{
    long n;
    char *text;

    fflush(c->stream);
    assert_true(dup2(c->saved, fileno(c->stream)) >= 0);
    close(c->saved);
    assert_int_equal(fseek(c->tmp, 0, SEEK_END), 0);
    n = ftell(c->tmp);
    assert_true(n >= 0);
    rewind(c->tmp);
    text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, c->tmp), (size_t)n);
    text[n] = '\0';
    fclose(c->tmp);
    return text;
}

#endif
