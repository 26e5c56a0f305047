/*
 * fuzz_weights_archive.c - weight headers inside archives, as an upload reads them: the
 * bytes are sniffed (store_media_type_detect), inspected (store_archive_inspect), and when
 * that accepts them, art_introspect() streams the members named *.safetensors, *.gguf and
 * *.onnx through libarchive (tar, gzip, zstd, xz, zip; archives inside archives are not
 * opened). A plain blob goes through the content sniff instead.
 *
 * Input: the blob's bytes, written to one file per fuzzing process.
 *
 * Checked besides memory safety:
 * - art_introspect accepts or refuses as malformed (MG_EINVAL), nothing else; a refusal
 *   names the member (or the blob) and the byte offset, and returns no output;
 * - an accepted archive's formats are sorted and unique, and every member listed in the
 *   summary is a path of the inspected manifest with one of the three extensions.
 */
#include "fuzz.h"

#include <fcntl.h>

#include "artifact/archive.h"
#include "artifact/introspect.h"

static char blob_path[PATH_MAX]; /* harness context */
static struct store_archive_limits limits;
static struct art_introspect_limits ilim;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (snprintf(blob_path, sizeof(blob_path), "%s/blob", fuzz_scratch("weights_archive")) >=
        (int)sizeof(blob_path))
        abort(); /* TMPDIR too long */
    limits.max_total_bytes = 8u << 20;
    limits.max_entries = 4096;
    limits.max_path_len = 1024;
    art_introspect_limits_default(&ilim);
    ilim.max_safetensors_header = 1 << 20;
    ilim.max_json_values = 10000;
    ilim.max_gguf_header = 1 << 20;
    ilim.max_onnx_structure = 1 << 20;
    ilim.max_onnx_memory = 32 << 20;
    ilim.max_members = 64;
    return 0;
}

static void write_blob(const uint8_t *data, size_t size)
{
    int fd = open(blob_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t off = 0;

    FUZZ_CHECK(fd >= 0, "cannot open %s: %s", blob_path, strerror(errno));
    while (off < size) {
        ssize_t n = write(fd, data + off, size - off);
        FUZZ_CHECK(n > 0, "cannot write %s: %s", blob_path, strerror(errno));
        off += (size_t)n;
    }
    close(fd);
}

static bool in_manifest(const struct store_archive_manifest *m, const char *path)
{
    size_t i;

    for (i = 0; i < m->n; i++) {
        if (strcmp(m->files[i].path, path) == 0)
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct store_archive_manifest m = {NULL, 0};
    struct mg_error err;
    json_t *formats = NULL, *intro = NULL, *e;
    const char *media = store_media_type_detect(data, size), *prev = "";
    bool is_archive = false;
    enum mg_code rc;
    size_t i;

    write_blob(data, size);
    memset(&err, 0, sizeof(err));
    if (store_archive_inspect(blob_path, media, &limits, &m, &is_archive, &err) != MG_OK)
        return 0;
    memset(&err, 0, sizeof(err));
    rc = art_introspect(blob_path, media, is_archive ? &m : NULL, &ilim, &formats, &intro, &err);
    FUZZ_CHECK(rc == MG_OK || rc == MG_EINVAL, "returned %d: %s", (int)rc, err.message);
    if (rc != MG_OK) {
        FUZZ_CHECK(formats == NULL && intro == NULL, "refused with output");
        FUZZ_CHECK(strstr(err.message, "byte offset") != NULL ||
                       strstr(err.message, "archive") != NULL,
                   "refusal '%s' names neither offset nor archive", err.message);
    } else {
        json_array_foreach(formats, i, e)
        {
            FUZZ_CHECK(strcmp(prev, json_string_value(e)) < 0, "formats unsorted or repeated");
            prev = json_string_value(e);
        }
        json_array_foreach(json_object_get(intro, "members"), i, e) FUZZ_CHECK(
            in_manifest(&m, json_string_value(json_object_get(e, "path"))),
            "member '%s' is not in the manifest", json_string_value(json_object_get(e, "path")));
    }
    json_decref(formats);
    json_decref(intro);
    store_archive_manifest_release(&m);
    return 0;
}
