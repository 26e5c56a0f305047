/*
 * replay.c - a main() for a libFuzzer target without libFuzzer (M29): runs
 * LLVMFuzzerTestOneInput() once on every file named on the command line (a directory:
 * every file in it, in name order). ctest builds one per target with the project's
 * compiler (gcc too: libFuzzer needs clang) and replays the committed seed corpus
 * tests/fuzz/corpus/<target>/ in the normal and the sanitizer build, so a seed that
 * crashes, leaks or breaks an invariant (FUZZ_CHECK aborts) fails the suite.
 *
 * Exit status: 0 when every input ran, 1 when there was none or one could not be read
 * (a crash aborts on its own).
 */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One input: read it whole, run it. False when it cannot be read. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        perror(path);
        if (f != NULL)
            fclose(f);
        return 0;
    }
    /* a copy of exactly the input's size, so ASan sees a read past its end */
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(buf);
        fclose(f);
        return 0;
    }
    fclose(f);
    fprintf(stderr, "replay: %s (%ld bytes)\n", path, n);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    size_t ran = 0;
    int ok = 1;

    if (LLVMFuzzerInitialize != NULL)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        struct dirent **names;
        int n;

        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            ok = 0;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            ok &= replay_file(argv[i]);
            ran++;
            continue;
        }
        n = scandir(argv[i], &names, NULL, by_name);
        if (n < 0) {
            perror(argv[i]);
            ok = 0;
            continue;
        }
        for (int j = 0; j < n; j++) {
            char path[4096];

            if (names[j]->d_name[0] != '.' &&
                snprintf(path, sizeof(path), "%s/%s", argv[i], names[j]->d_name) <
                    (int)sizeof(path) &&
                stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                ok &= replay_file(path);
                ran++;
            }
            free(names[j]);
        }
        free(names);
    }
    fprintf(stderr, "replay: %zu input(s)\n", ran);
    if (ran == 0) {
        fprintf(stderr, "replay: no input: name the corpus directory\n");
        return 1;
    }
    return ok ? 0 : 1;
}
