/*
 * runner.c - see runner.h: profiles, running one test, the worker and periodic threads.
 * The artifact cache is cache.c.
 */
#include "runner_int.h"

#include "../os/wait.h"
#include "../base/text.h"

/* ---- profiles ---------------------------------------------------------- */

enum mg_code runner_profile_parse(const char *spec, struct runner_profile *out,
                                  struct mg_error *err)
{
    const char *eq = strchr(spec, '='), *p;
    size_t nl = eq ? (size_t)(eq - spec) : 0;
    struct mg_buf word;
    bool in_word = false;
    char quote = 0;

    memset(out, 0, sizeof(*out));
    if (eq == NULL || nl == 0 || nl >= sizeof(out->name) || !mg_valid_gateway_name(spec, nl))
        return mg_fail(err, MG_EINVAL, "smoke-profile",
                       "--smoke-profile wants NAME=COMMAND with NAME like onnx-cpu, not '%.60s'",
                       spec);
    memcpy(out->name, spec, nl);
    mg_buf_init(&word, 4096);
    for (p = eq + 1;; p++) {
        char c = *p;
        bool end_word = c == '\0' || (!quote && (c == ' ' || c == '\t'));

        if (end_word) {
            if (quote && c == '\0')
                goto bad;
            if (in_word) {
                if (out->argc >= RUNNER_ARGV_MAX)
                    goto bad;
                out->argv[out->argc++] = word.data ? word.data : strdup("");
                mg_buf_init(&word, 4096);
                in_word = false;
            }
            if (c == '\0')
                break;
            continue;
        }
        in_word = true;
        if (quote) {
            if (c == quote) {
                quote = 0;
                if (mg_buf_append(&word, "", 0) != MG_OK)
                    goto bad;
                continue;
            }
        } else if (c == '\'' || c == '"') {
            quote = c;
            if (mg_buf_append(&word, "", 0) != MG_OK)
                goto bad;
            continue;
        } else if (c == '\\' && p[1]) {
            c = *++p;
        }
        if (mg_buf_append(&word, &c, 1) != MG_OK)
            goto bad;
    }
    if (out->argc == 0)
        goto bad;
    return MG_OK;
bad:
    mg_buf_release(&word);
    runner_profile_release(out);
    return mg_fail(err, MG_EINVAL, "smoke-profile",
                   "--smoke-profile %.*s: the command is empty, too long or has an unclosed "
                   "quote",
                   (int)nl, spec);
}

enum mg_code runner_profile_cost(struct runner_profile *profiles, unsigned n, const char *spec,
                                 struct mg_error *err)
{
    const char *eq = strchr(spec, '=');
    size_t nl = eq ? (size_t)(eq - spec) : 0;
    char *end = NULL;
    double cost;
    unsigned i;

    if (eq == NULL || nl == 0 || eq[1] == '\0')
        return mg_fail(err, MG_EINVAL, "smoke-profile-cost",
                       "--smoke-profile-cost takes NAME=COST (the cost per hour of the machine "
                       "profile NAME runs on), not '%.100s'",
                       spec);
    cost = strtod(eq + 1, &end);
    if (end == NULL || *end != '\0' || !isfinite(cost) || cost < 0)
        return mg_fail(err, MG_EINVAL, "smoke-profile-cost",
                       "--smoke-profile-cost %.*s: '%.40s' is not a number >= 0", (int)nl, spec,
                       eq + 1);
    for (i = 0; i < n; i++) {
        if (strlen(profiles[i].name) == nl && memcmp(profiles[i].name, spec, nl) == 0) {
            profiles[i].has_cost = true;
            profiles[i].cost_per_hour = cost;
            return MG_OK;
        }
    }
    return mg_fail(err, MG_EINVAL, "smoke-profile-cost",
                   "--smoke-profile-cost names profile '%.*s', which no --smoke-profile defines",
                   (int)nl, spec);
}

void runner_profile_release(struct runner_profile *p)
{
    unsigned i;

    for (i = 0; i < p->argc; i++)
        free(p->argv[i]);
    memset(p, 0, sizeof(*p));
}

static const struct runner_profile *find_profile(const struct runner *rn, const char *name)
{
    unsigned i;

    for (i = 0; name && i < rn->opt.nprofiles; i++) {
        if (strcmp(rn->opt.profiles[i].name, name) == 0)
            return &rn->opt.profiles[i];
    }
    return NULL;
}

static void profile_names(const struct runner *rn, char *out, size_t n)
{
    unsigned i;
    size_t k = 0;

    out[0] = '\0';
    for (i = 0; i < rn->opt.nprofiles && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s%s", i ? ", " : "", rn->opt.profiles[i].name);
    if (rn->opt.nprofiles == 0)
        snprintf(out, n, "(none configured; see --smoke-profile)");
}

/* ---- helpers ----------------------------------------------------------- */

double runner_percentile(const double *sorted, size_t n, double p)
{
    size_t rank;

    if (n == 0)
        return 0;
    /* p * n first: p / 100 is inexact (0.07 * 100 is 7.000000000000001, rank 8) */
    rank = (size_t)ceil(p * (double)n / 100.0);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(path);
}

/* Remove a test's directory; never follows symbolic links. */
void runner_rm_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

struct limits {
    const char *work; /* where the group's id is noted */
    uint64_t cpu_s;
    uint64_t as_mib; /* 0: unlimited */
};

/* In the child before exec: CPU, address space, open files, no core. */
static void child_limits(void *arg)
{
    const struct limits *l = arg;
    struct rlimit r;

    r.rlim_cur = r.rlim_max = l->cpu_s;
    setrlimit(RLIMIT_CPU, &r);
    if (l->as_mib) {
        r.rlim_cur = r.rlim_max = (rlim_t)l->as_mib << 20;
        setrlimit(RLIMIT_AS, &r);
    }
    r.rlim_cur = r.rlim_max = 1024;
    setrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = r.rlim_max = 0;
    setrlimit(RLIMIT_CORE, &r);
}

/* Note the process group in the test's directory, so that a restart after a
 * crash can kill what the crashed server left running. */
static void note_pgid(pid_t pid, void *arg)
{
    const struct limits *l = arg;
    char path[PATH_MAX];
    FILE *f;

    snprintf(path, sizeof(path), "%.4000s/pgid", l->work);
    if ((f = fopen(path, "we")) != NULL) {
        fprintf(f, "%d\n", (int)pid);
        fclose(f);
    }
}

static int kill_noted(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    FILE *fp;
    int pg = 0;

    (void)sb;
    if (flag != FTW_F || f->level != 2 || strcmp(path + f->base, "pgid") != 0)
        return 0;
    if ((fp = fopen(path, "re")) != NULL) {
        if (fscanf(fp, "%d", &pg) == 1 && pg > 1)
            kill(-pg, SIGKILL);
        fclose(fp);
    }
    return 0;
}

/* Peak GPU memory while the command runs, sampled from NVML. */
struct sampler {
    struct runner_nvml *nvml;
    unsigned index;
    uint64_t base, peak;
    volatile bool stop;
};

static void *sample_main(void *arg)
{
    struct sampler *s = arg;
    struct timespec ts = {0, SAMPLE_MS * 1000000L};

    while (!s->stop) {
        uint64_t used;
        if (runner_nvml_used_mib(s->nvml, s->index, &used) && used > s->base &&
            used - s->base > s->peak)
            s->peak = used - s->base;
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Read and check the command's output JSON into result. false → reason set. */
static bool read_output(const char *path, const json_t *job, json_t *result, char *reason,
                        size_t rn)
{
    json_error_t je;
    json_t *o, *lat, *checks, *c, *v;
    double *vals = NULL, p95;
    size_t n, i;
    bool ok = true;
    json_t *max_p95 = json_object_get(json_object_get(job, "smoke"), "max_p95_ms");
    struct stat sb;
    FILE *fp = NULL;
    int fd;

    if (lstat(path, &sb) != 0) {
        snprintf(reason, rn, "the command wrote no output file ($MODELGATE_OUTPUT)");
        return false;
    }
    if (sb.st_size > (off_t)OUTPUT_MAX) {
        snprintf(reason, rn, "the output file is larger than %u bytes", OUTPUT_MAX);
        return false;
    }
    /* Never block on a FIFO nor follow a link the command left there. */
    fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (fp = fdopen(fd, "r")) == NULL) {
        if (fd >= 0)
            close(fd);
        snprintf(reason, rn, "the output ($MODELGATE_OUTPUT) is not a regular file");
        return false;
    }
    o = json_loadf(fp, JSON_REJECT_DUPLICATES, &je);
    fclose(fp);
    if (!json_is_object(o)) {
        snprintf(reason, rn, "the output is not a JSON object (line %d: %s)", je.line, je.text);
        json_decref(o);
        return false;
    }
    lat = json_object_get(o, "latencies_ms");
    checks = json_object_get(o, "checks");
    if ((lat && !json_is_array(lat)) || (checks && !json_is_array(checks)) ||
        json_array_size(lat) > LATENCIES_MAX) {
        snprintf(reason, rn, "output must be {\"latencies_ms\":[numbers],\"checks\":[...]}");
        json_decref(o);
        return false;
    }
    n = json_array_size(lat);
    if (n > 0) {
        vals = malloc(n * sizeof(*vals));
        if (vals == NULL) {
            json_decref(o);
            snprintf(reason, rn, "out of memory");
            return false;
        }
        json_array_foreach(lat, i, v)
        {
            if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0) {
                snprintf(reason, rn, "latencies_ms[%zu] is not a non-negative number", i);
                free(vals);
                json_decref(o);
                return false;
            }
            vals[i] = json_number_value(v);
        }
        qsort(vals, n, sizeof(*vals), cmp_double);
        p95 = runner_percentile(vals, n, 95);
        json_object_set_new(result, "latency_ms",
                            json_pack("{s:f, s:f, s:f, s:I}", "p50", runner_percentile(vals, n, 50),
                                      "p95", p95, "max", vals[n - 1], "samples", (json_int_t)n));
        if (json_is_number(max_p95) && p95 > json_number_value(max_p95)) {
            char a[32], b[32];

            snprintf(reason, rn, "p95 latency %s ms is over the budget of %s ms",
                     mg_fmt_double(p95, a, sizeof(a)),
                     mg_fmt_double(json_number_value(max_p95), b, sizeof(b)));
            ok = false;
        }
        free(vals);
    } else if (json_is_number(max_p95)) {
        snprintf(reason, rn, "smoke.max_p95_ms is set but the output has no latencies_ms");
        ok = false;
    }
    json_array_foreach(checks, i, c)
    {
        json_t *passed = json_object_get(c, "passed");
        const char *name = json_string_value(json_object_get(c, "name"));
        if (!json_is_object(c) || name == NULL || !json_is_boolean(passed)) {
            snprintf(reason, rn, "checks[%zu] needs a name and a boolean passed", i);
            json_decref(o);
            return false;
        }
        if (ok && !json_is_true(passed)) {
            snprintf(reason, rn, "check '%.100s' failed%s%.200s", name,
                     json_string_value(json_object_get(c, "detail")) ? ": " : "",
                     json_string_value(json_object_get(c, "detail"))
                         ? json_string_value(json_object_get(c, "detail"))
                         : "");
            ok = false;
        }
    }
    json_object_set_new(result, "checks", checks ? json_incref(checks) : json_array());
    /* The test's own throughput under its load (docs/contract.md "Quotas and cost"), when it says.
     */
    v = json_object_get(o, "throughput_rps");
    if (json_is_number(v) && isfinite(json_number_value(v)) && json_number_value(v) > 0)
        json_object_set_new(result, "reported_rps", json_real(json_number_value(v)));
    json_decref(o);
    return ok;
}

/* Throughput (the test's own figure, else its timed requests over the command's wall time)
 * and, with a cost for the profile, the cost per thousand requests. */
static void serving_cost(const struct runner_profile *prof, json_t *result, double wall_s)
{
    json_t *rep = json_object_get(result, "reported_rps");
    json_t *samples = json_object_get(json_object_get(result, "latency_ms"), "samples");
    double rps, cost;

    if (gate_throughput(rep ? json_number_value(rep) : NAN,
                        (size_t)(json_is_integer(samples) ? json_integer_value(samples) : 0),
                        wall_s, &rps)) {
        json_object_set_new(result, "throughput_rps", json_real(rps));
        if (prof->has_cost && gate_cost_per_1k(prof->cost_per_hour, rps, &cost))
            json_object_set_new(result, "cost_per_1k_requests", json_real(cost));
    }
    json_object_del(result, "reported_rps");
}

/* Put the artifact in dir: an archive is extracted, a single file copied. */

/* Choose where to run: the GPU with most free memory that fits, or the CPU. */
static bool choose_gpu(struct runner *rn, const json_t *job, struct runner_gpu *gpu, char *reason,
                       size_t rlen, bool *use_gpu)
{
    const char *mode = json_string_value(json_object_get(job, "gpu_mode"));
    struct runner_gpu g[RUNNER_GPU_MAX];
    unsigned n, i;
    double need = 0;
    int best = -1;

    *use_gpu = false;
    if (mode && strcmp(mode, "none") == 0)
        return true;
    /* The version's estimate: its resources, else what its artifact's headers say. */
    if (!gate_version_vram_gib(job, &need))
        need = 0;
    n = runner_nvml_gpus(rn->nvml, g, RUNNER_GPU_MAX);
    for (i = 0; i < n; i++) {
        if ((double)g[i].memory_free_mib / 1024.0 >= need &&
            (best < 0 || g[i].memory_free_mib > g[best].memory_free_mib))
            best = (int)i;
    }
    if (best >= 0) {
        *gpu = g[best];
        *use_gpu = true;
        return true;
    }
    if (mode && strcmp(mode, "required") == 0) {
        if (n == 0)
            snprintf(reason, rlen, "the policy requires a GPU and none is available (%s)",
                     runner_nvml_available(rn->nvml) ? "NVML reports no device"
                                                     : runner_nvml_error(rn->nvml));
        else {
            char num[32];

            snprintf(reason, rlen,
                     "no GPU has %s GiB free for this version (estimated inference memory)",
                     mg_fmt_double(need, num, sizeof(num)));
        }
        return false;
    }
    return true; /* preferred: fall back to the CPU */
}

/* Run one claimed test; returns the result object (NEW). */
static json_t *run_job(struct runner *rn, const json_t *job)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *pname = json_string_value(json_object_get(job, "profile"));
    const struct runner_profile *prof = find_profile(rn, pname);
    json_t *result = json_pack("{s:s, s:[]}", "state", "error", "checks");
    char work[PATH_MAX], model_dir[PATH_MAX], output[PATH_MAX], names[512];
    char reason[600] = "", env_dir[PATH_MAX + 32], env_out[PATH_MAX + 32], env_model[128];
    char env_version[64], env_cuda[160], resolved[PATH_MAX], scratch[64];
    const char *argv[RUNNER_ARGV_MAX + 1], *envp[8];
    struct runner_gpu gpu;
    struct srv_proc_result pr;
    struct srv_proc_opts po;
    struct limits lim;
    struct sampler smp;
    pthread_t sampler_thread;
    bool use_gpu = false, sampling = false;
    int64_t t0 = mg_mono_ms(), t_run = 0;
    struct mg_error err;
    unsigned i;

    snprintf(work, sizeof(work) - 64, "%s/%s", rn->opt.work_dir, id); /* room for /model */
    snprintf(model_dir, sizeof(model_dir), "%.4000s/model", work);
    snprintf(output, sizeof(output), "%.4000s/output.json", work);
    if (prof == NULL) {
        profile_names(rn, names, sizeof(names));
        if (pname == NULL)
            snprintf(reason, sizeof(reason),
                     "the version declares no smoke.profile; this server has: %s", names);
        else
            snprintf(reason, sizeof(reason), "unknown smoke profile '%s'; this server has: %s",
                     pname, names);
        goto out;
    }
    if (!choose_gpu(rn, job, &gpu, reason, sizeof(reason), &use_gpu)) {
        json_object_set_new(result, "state", json_string("failed"));
        goto out;
    }
    if (mkdir(work, 0700) != 0 || mkdir(model_dir, 0700) != 0) {
        snprintf(reason, sizeof(reason), "cannot create the test directory: %s", strerror(errno));
        goto out;
    }
    if (runner_extract_artifact(rn, job, model_dir, &err) != MG_OK) {
        snprintf(reason, sizeof(reason), "the artifact cannot be extracted safely: %s",
                 err.message);
        json_object_set_new(result, "state", json_string("failed"));
        goto out;
    }
    /* argv from the profile with {model_dir} and {output} filled in. */
    for (i = 0; i < prof->argc; i++) {
        const char *a = prof->argv[i];
        argv[i] = strcmp(a, "{model_dir}") == 0 ? model_dir
                  : strcmp(a, "{output}") == 0  ? output
                                                : a;
    }
    argv[i] = NULL;
    snprintf(env_dir, sizeof(env_dir), "MODELGATE_MODEL_DIR=%s", model_dir);
    snprintf(env_out, sizeof(env_out), "MODELGATE_OUTPUT=%s", output);
    snprintf(env_model, sizeof(env_model), "MODELGATE_MODEL=%s",
             json_string_value(json_object_get(job, "model")));
    snprintf(env_version, sizeof(env_version), "MODELGATE_VERSION=%lld",
             (long long)json_integer_value(json_object_get(job, "version")));
    /* No GPU chosen: hide every GPU rather than let the command pick one. */
    snprintf(env_cuda, sizeof(env_cuda), "CUDA_VISIBLE_DEVICES=%s", use_gpu ? gpu.uuid : "");
    envp[0] = env_dir;
    envp[1] = env_out;
    envp[2] = env_model;
    envp[3] = env_version;
    envp[4] = env_cuda;
    envp[5] = "PATH=/usr/local/bin:/usr/bin:/bin";
    envp[6] = "LANG=C.UTF-8";
    envp[7] = NULL;
    lim.cpu_s = (uint64_t)(rn->opt.timeout_ms / 1000) + 5;
    lim.as_mib = use_gpu ? 0 : rn->opt.memory_limit_mib;
    memset(&po, 0, sizeof(po));
    po.timeout_ms = (int)rn->opt.timeout_ms;
    po.envp = envp;
    po.cwd = work;
    po.child_setup = child_limits;
    po.child_arg = &lim;
    po.cancel = &rn->cancel;
    po.on_start = note_pgid;
    lim.work = work;
    if (use_gpu) {
        json_object_set_new(result, "gpu",
                            json_pack("{s:s, s:s, s:I}", "name", gpu.name, "uuid", gpu.uuid,
                                      "index", (json_int_t)gpu.index));
        memset(&smp, 0, sizeof(smp));
        smp.nvml = rn->nvml;
        smp.index = gpu.index;
        runner_nvml_used_mib(rn->nvml, gpu.index, &smp.base);
        sampling = pthread_create(&sampler_thread, NULL, sample_main, &smp) == 0;
    }
    /* argv[0] is resolved with the clean PATH, not the server's. */
    if (strchr(argv[0], '/') == NULL) {
        static const char *const dirs[] = {"/usr/local/bin", "/usr/bin", "/bin"};
        size_t d;
        for (d = 0; d < 3; d++) {
            snprintf(resolved, sizeof(resolved), "%s/%s", dirs[d], argv[0]);
            if (access(resolved, X_OK) == 0)
                break;
        }
        argv[0] = d < 3 ? resolved : argv[0];
    }
    t_run = mg_mono_ms();
    srv_proc_run(argv, &po, &pr);
    t_run = mg_mono_ms() - t_run;
    if (sampling) {
        smp.stop = true;
        pthread_join(sampler_thread, NULL);
        json_object_set_new(result, "peak_gpu_memory_mib", json_integer((json_int_t)smp.peak));
    }
    json_object_set_new(result, "exit_code", json_integer(pr.exit_code));
    json_object_set_new(result, "log_tail", json_stringn(pr.tail, pr.tail_len));
    if (pr.timed_out) {
        snprintf(reason, sizeof(reason), "timed out after %lld ms; the process group was killed",
                 (long long)rn->opt.timeout_ms);
        json_object_set_new(result, "state", json_string("failed"));
        goto out;
    }
    if (pr.exit_code != 0) {
        snprintf(reason, sizeof(reason), "the command exited with status %d", pr.exit_code);
        json_object_set_new(result, "state", json_string("failed"));
        read_output(output, job, result, scratch, sizeof(scratch)); /* keep its checks */
        goto out;
    }
    json_object_set_new(result, "state",
                        json_string(read_output(output, job, result, reason, sizeof(reason))
                                        ? "passed"
                                        : "failed"));
    serving_cost(prof, result, (double)t_run / 1000.0);
out:
    runner_rm_tree(work);
    json_object_set_new(result, "reason", reason[0] ? json_string(reason) : json_null());
    json_object_set_new(result, "duration_ms", json_integer(mg_mono_ms() - t0));
    return result;
}

/* ---- threads ----------------------------------------------------------- */

static void *worker_main(void *arg)
{
    struct runner *rn = arg;

    pthread_mutex_lock(&rn->lock);
    while (!rn->stop) {
        json_t *job = NULL, *result;
        bool found = false;
        struct mg_error err;

        if (rn->kicks > 0)
            rn->kicks--;
        pthread_mutex_unlock(&rn->lock);
        if (store_smoke_claim(rn->ctl->store, &job, &found, &err) == MG_OK && found) {
            const char *id = json_string_value(json_object_get(job, "id"));
            result = run_job(rn, job);
            if (rn->cancel) {
                /* Stopped by shutdown: left 'running', queued again at the
                 * next start; not a failure of the version. */
                json_decref(result);
                json_decref(job);
                pthread_mutex_lock(&rn->lock);
                break;
            }
            /* The result counts for this claim only (its token): a claim that lapsed
             * meanwhile (the test was queued again) records nothing and tells nobody. */
            if (result != NULL &&
                json_object_set(result, "claim", json_object_get(job, "claim")) != 0)
                fprintf(stderr, "modelgated: smoke test %s: out of memory\n", id);
            if (store_smoke_finish(rn->ctl->store, id, result, &err) != MG_OK)
                fprintf(stderr, "modelgated: smoke test %s: cannot record: %s\n", id, err.message);
            else {
                struct ctl_event ev = {
                    .kind = CTL_EV_SMOKE_FINISHED,
                    .model = json_string_value(json_object_get(job, "model")),
                    .version = json_integer_value(json_object_get(job, "version")),
                    .state = json_string_value(json_object_get(result, "state")),
                    .reason = json_string_value(json_object_get(result, "reason")),
                };

                ctl_event_post(rn->ctl, &ev);
            }
            json_decref(result);
            json_decref(job);
            pthread_mutex_lock(&rn->lock);
            continue;
        }
        pthread_mutex_lock(&rn->lock);
        if (!rn->stop && rn->kicks == 0)
            (void)mg_wait_until(&rn->wake, &rn->lock, mg_mono_ms() + 1000);
    }
    pthread_mutex_unlock(&rn->lock);
    return NULL;
}

static void kick(struct runner *rn)
{
    pthread_mutex_lock(&rn->lock);
    rn->kicks++;
    pthread_cond_broadcast(&rn->wake.cond);
    pthread_mutex_unlock(&rn->lock);
}

void runner_kick(struct ctl *ctl)
{
    if (((struct runner *)ctl->rn.impl))
        kick(((struct runner *)ctl->rn.impl));
}

/* Re-test every routed version every interval. */
static void *periodic_main(void *arg)
{
    struct runner *rn = arg;
    int64_t next = mg_mono_ms() + rn->opt.interval_s * 1000;

    pthread_mutex_lock(&rn->lock);
    while (!rn->stop) {
        if (mg_mono_ms() >= next) {
            json_t *routed = NULL, *r;
            struct mg_error err;
            size_t i;
            int64_t epoch;
            pthread_mutex_unlock(&rn->lock);
            /* The leader queues the cluster's re-tests; every replica's workers run them.
             * Each is queued only while this replica still leads at the epoch the pass
             * started with: one that lost the lease since (a pause) stops, quietly. */
            epoch = store_leader_epoch(rn->ctl->store);
            if (epoch != 0 && store_routed_versions(rn->ctl->store, &routed, &err) == MG_OK) {
                json_array_foreach(routed, i, r)
                {
                    if (runner_enqueue(rn->ctl, epoch,
                                       json_string_value(json_object_get(r, "model")),
                                       json_integer_value(json_object_get(r, "version")),
                                       "periodic", "preferred", NULL, &err) != MG_OK &&
                        err.code == MG_EUNAVAIL)
                        break;
                }
            }
            json_decref(routed);
            next = mg_mono_ms() + rn->opt.interval_s * 1000;
            pthread_mutex_lock(&rn->lock);
            continue;
        }
        (void)mg_wait_until(&rn->wake, &rn->lock, mg_mono_ms() + 1000);
    }
    pthread_mutex_unlock(&rn->lock);
    return NULL;
}

enum mg_code runner_start(struct ctl *ctl, const struct runner_options *o, struct mg_error *err)
{
    struct runner *rn = calloc(1, sizeof(*rn));
    unsigned i, n = o->workers ? o->workers : 1;

    if (rn == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    rn->ctl = ctl;
    rn->opt = *o;
    if (n > sizeof(rn->threads) / sizeof(rn->threads[0]))
        n = sizeof(rn->threads) / sizeof(rn->threads[0]);
    pthread_mutex_init(&rn->lock, NULL);
    mg_wait_init(&rn->wake);
    pthread_mutex_init(&rn->cache_lock, NULL);
    rn->nvml = runner_nvml_open(o->nvml_library);
    if (mkdir(o->work_dir, 0700) != 0 && errno != EEXIST) {
        mg_fail(err, MG_EIO, NULL, "cannot create %s: %s", o->work_dir, strerror(errno));
        goto fail;
    }
    nftw(o->work_dir, kill_noted, 16, FTW_PHYS); /* processes a crash left running */
    runner_rm_tree(o->work_dir);                 /* leftovers of a crash */
    snprintf(rn->cache_dir, sizeof(rn->cache_dir), "%.4000s-cache", o->work_dir);
    runner_rm_tree(
        rn->cache_dir); /* extractions of a previous run: a fresh start bounds the disk */
    if (mkdir(o->work_dir, 0700) != 0 && errno != EEXIST) {
        mg_fail(err, MG_EIO, NULL, "cannot create %s: %s", o->work_dir, strerror(errno));
        goto fail;
    }
    if (store_smoke_recover(ctl->store, 0, err) != MG_OK)
        goto fail;
    ctl->rn.impl = rn;
    for (i = 0; i < n; i++) {
        if (pthread_create(&rn->threads[i], NULL, worker_main, rn) == 0)
            rn->nthreads++;
    }
    if (o->interval_s > 0 && pthread_create(&rn->periodic, NULL, periodic_main, rn) == 0)
        rn->periodic_started = true;
    if (rn->nthreads == 0) {
        runner_free(ctl);
        return mg_fail(err, MG_EIO, NULL, "cannot start the runner threads");
    }
    fprintf(stderr, "modelgated: runner: %u worker(s), %u profile(s), NVML %s%s%s\n", rn->nthreads,
            o->nprofiles, runner_nvml_available(rn->nvml) ? "available" : "unavailable",
            runner_nvml_available(rn->nvml) ? "" : ": ",
            runner_nvml_available(rn->nvml) ? "" : runner_nvml_error(rn->nvml));
    return MG_OK;
fail:
    runner_nvml_close(&rn->nvml);
    pthread_mutex_destroy(&rn->cache_lock);
    pthread_mutex_destroy(&rn->lock);
    mg_wait_release(&rn->wake);
    free(rn);
    return err->code;
}

void runner_stop(struct ctl *ctl)
{
    struct runner *rn = ctl->rn.impl;
    unsigned i;

    if (rn == NULL)
        return;
    pthread_mutex_lock(&rn->lock);
    rn->stop = true;
    rn->cancel = 1;
    pthread_cond_broadcast(&rn->wake.cond);
    pthread_mutex_unlock(&rn->lock);
    for (i = 0; i < rn->nthreads; i++)
        pthread_join(rn->threads[i], NULL);
    if (rn->periodic_started)
        pthread_join(rn->periodic, NULL);
    rn->nthreads = 0;
    rn->periodic_started = false;
}

void runner_free(struct ctl *ctl)
{
    struct runner *rn = ctl->rn.impl;

    if (rn == NULL)
        return;
    runner_stop(ctl);
    runner_nvml_close(&rn->nvml);
    pthread_mutex_destroy(&rn->cache_lock);
    pthread_mutex_destroy(&rn->lock);
    mg_wait_release(&rn->wake);
    ctl->rn.impl = NULL;
    free(rn);
}

enum mg_code runner_enqueue(struct ctl *ctl, int64_t leader_epoch, const char *model,
                            int64_t version, const char *trigger, const char *gpu_mode,
                            json_t **out, struct mg_error *err)
{
    json_t *t = NULL;
    bool created = false;
    enum mg_code rc = store_smoke_enqueue(ctl->store, leader_epoch, model, version, trigger,
                                          gpu_mode, &t, &created, err);

    if (rc == MG_OK && created && ((struct runner *)ctl->rn.impl))
        kick(((struct runner *)ctl->rn.impl));
    if (rc == MG_OK && out)
        *out = t;
    else
        json_decref(t);
    return rc;
}

enum mg_code runner_enqueue_routes(struct ctl *ctl, const char *model, const char *alias,
                                   const json_t *payload, struct mg_error *err)
{
    struct gate_policy pol;
    json_t *pj = NULL, *r;
    json_t *versions = store_generation_versions(json_object_get(payload, "routes"),
                                                 json_object_get(payload, "match"),
                                                 json_object_get(payload, "shadow"));
    const char *mode = "none";
    size_t i;
    enum mg_code rc = MG_OK;

    if (versions == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");

    if (store_policy_get(ctl->store, model, alias, &pj, err) == MG_OK &&
        gate_policy_parse(pj, &pol, err) == MG_OK)
        mode = pol.gpu == GATE_GPU_REQUIRED    ? "required"
               : pol.gpu == GATE_GPU_PREFERRED ? "preferred"
                                               : "none";
    json_decref(pj);
    json_array_foreach(versions, i, r)
    {
        json_int_t v = json_integer_value(r);
        json_t *ver = NULL;
        bool has_profile;

        /* A version that names no profile has nothing to run. */
        if (store_version_get(ctl->store, model, v, &ver, err) != MG_OK)
            continue;
        has_profile = json_is_string(json_object_get(json_object_get(ver, "smoke"), "profile"));
        json_decref(ver);
        if (!has_profile)
            continue;
        rc = runner_enqueue(ctl, 0, model, v, "route", mode, NULL, err);
        if (rc != MG_OK && rc != MG_ENOTFOUND)
            break;
        rc = MG_OK;
    }
    json_decref(versions);
    return rc;
}

json_t *runner_info(struct ctl *ctl)
{
    struct runner *rn = ctl->rn.impl;
    json_t *out, *profiles = json_array();
    int64_t queued = 0, running = 0;
    struct mg_error err;
    unsigned i;

    out = runner_nvml_json(rn ? rn->nvml : NULL);
    for (i = 0; rn && i < rn->opt.nprofiles; i++)
        json_array_append_new(profiles, json_string(rn->opt.profiles[i].name));
    store_smoke_counts(ctl->store, &queued, &running, &err);
    json_object_set_new(out, "profiles", profiles);
    json_object_set_new(out, "queued", json_integer(queued));
    json_object_set_new(out, "running", json_integer(running));
    json_object_set_new(out, "workers", json_integer(rn ? rn->nthreads : 0));
    return out;
}

double runner_largest_gpu_gib(struct ctl *ctl)
{
    struct runner_gpu g[RUNNER_GPU_MAX];
    unsigned n, i;
    double best = -1;

    if (((struct runner *)ctl->rn.impl) == NULL)
        return -1;
    n = runner_nvml_gpus(((struct runner *)ctl->rn.impl)->nvml, g, RUNNER_GPU_MAX);
    for (i = 0; i < n; i++) {
        double gib = (double)g[i].memory_total_mib / 1024.0;
        if (gib > best)
            best = gib;
    }
    return best;
}

void runner_register(struct ctl *ctl)
{
    ctl->rn = (struct ctl_runner){
        .impl = NULL,
        .enqueue = runner_enqueue,
        .enqueue_routes = runner_enqueue_routes,
        .kick = runner_kick,
        .info = runner_info,
        .largest_gpu_gib = runner_largest_gpu_gib,
        .cache_stats = runner_cache_stats,
    };
}
