/*
 * main.c - `modelgate`, the command-line client of modelgated's REST API: the command
 * table, --help, and dispatch. Messages are errors.c, option parsing args.c.
 */
#include "mgc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/util.h"

#define EXIT_CODES                                                                                 \
    "\nExit codes: 0 ok; 1 error (message on stderr); 2 usage; 3 gate failed, promotion\n"         \
    "rejected, aborted or rolled back; 4 timed out waiting.\n"

static const struct mgc_optdef login_opts[] = {
    {"url", 0, true}, {"token-file", 0, true}, {NULL, 0, false}};
static const struct mgc_optdef push_opts[] = {
    {"image", 0, true},   {"metrics", 0, true},       {"metric", 0, true},
    {"dataset", 0, true}, {"run-id", 0, true},        {"source-commit", 0, true},
    {"meta", 0, true},    {"create-model", 0, false}, {NULL, 0, false}};
static const struct mgc_optdef versions_opts[] = {{"limit", 0, true}, {NULL, 0, false}};
static const struct mgc_optdef no_opts[] = {{NULL, 0, false}};
static const struct mgc_optdef gates_opts[] = {{"alias", 0, true}, {NULL, 0, false}};
static const struct mgc_optdef promote_opts[] = {{"alias", 0, true},
                                                 {"reason", 0, true},
                                                 {"wait", 0, false},
                                                 {"timeout", 0, true},
                                                 {NULL, 0, false}};
static const struct mgc_optdef status_opts[] = {
    {"wait", 0, false}, {"timeout", 0, true}, {NULL, 0, false}};
static const struct mgc_optdef comment_opts[] = {{"comment", 0, true}, {NULL, 0, false}};
static const struct mgc_optdef abort_opts[] = {{"reason", 0, true}, {NULL, 0, false}};
static const struct mgc_optdef lkg_opts[] = {
    {"alias", 0, true}, {"format", 0, true}, {NULL, 0, false}};
static const struct mgc_optdef rollback_opts[] = {
    {"alias", 0, true}, {"reason", 0, true}, {"wait", 0, true}, {NULL, 0, false}};
static const struct mgc_optdef pull_opts[] = {{"output", 'o', true},
                                              {"key", 0, true},
                                              {"max-archive-ratio", 0, true},
                                              {"allow-unsafe", 0, false},
                                              {NULL, 0, false}};
static const struct mgc_optdef verify_opts[] = {
    {"key", 0, true}, {"max-archive-ratio", 0, true}, {NULL, 0, false}};

static const struct mgc_optdef models_opts[] = {{"q", 0, true}, {NULL, 0, false}};
static const struct mgc_optdef promotions_opts[] = {
    {"state", 0, true}, {"model", 0, true}, {"alias", 0, true}, {NULL, 0, false}};
static const struct mgc_optdef alias_opts[] = {{"wait", 0, true}, {NULL, 0, false}};
static const struct mgc_optdef token_opts[] = {
    {"role", 0, true}, {"team", 0, true}, {"alias", 0, true}, {NULL, 0, false}};

static const struct mgc_cmd commands[] = {
    {"login", "--url URL --token-file FILE",
     "Check the token against the server (GET /api/v1/whoami) and save URL and token in\n"
     "$XDG_CONFIG_HOME/modelgate/config.json (mode 0600). FILE may be '-' for stdin.\n"
     "MODELGATE_URL and MODELGATE_TOKEN override the saved values in every command.\n",
     login_opts, 0, 0, mgc_cmd_login},
    {"push",
     "MODEL PATH [--image REF] [--metrics FILE.json | --metric k=v ...]\n"
     "       [--dataset sha256:HEX:NAME:ROLE ...] [--run-id ID] [--source-commit SHA]\n"
     "       [--meta FILE.json] [--create-model]",
     "Upload PATH and register it as a new version of MODEL. A directory is packed as a\n"
     "reproducible tar (sorted names, fixed times, owners and modes), so the same tree\n"
     "always gives the same digest; a file is sent as it is. A progress bar shows on a\n"
     "terminal. Prints the new version number (--json: the Version).\n\n"
     "  --image REF          serving image pinned by digest (repo[:tag]@sha256:HEX)\n"
     "  --metrics FILE.json  {\"name\": number, ...}; or repeat --metric name=value\n"
     "  --dataset D:N:R      dataset digest, name and role (train|validation|test|eval)\n"
     "  --run-id ID, --source-commit SHA\n"
     "  --meta FILE.json     more VersionCreate fields (params, tags, description, smoke,\n"
     "                       resources, source.repo); the options above win\n"
     "  --create-model       create MODEL first when it does not exist\n",
     push_opts, 2, 2, mgc_cmd_push},
    {"versions", "MODEL [--limit N]", "List MODEL's versions, newest first (default 50).\n",
     versions_opts, 1, 1, mgc_cmd_versions},
    {"show", "MODEL N", "Show one version: artifact, image, datasets, metrics, signature.\n",
     no_opts, 2, 2, mgc_cmd_show},
    {"gates", "MODEL N --alias A",
     "Dry-run the gates version N would face for alias A now. Exits 3 when a gate fails.\n",
     gates_opts, 2, 2, mgc_cmd_gates},
    {"promote", "MODEL N --alias A [--reason TEXT] [--wait [--timeout S]]",
     "Start a promotion of version N to alias A and print its id. With --wait, follow it\n"
     "until it ends (default timeout 3600 s): exits 0 when it succeeded, 3 when it was\n"
     "rejected, aborted or rolled back, 4 on timeout.\n",
     promote_opts, 2, 2, mgc_cmd_promote},
    {"status", "ID [--wait [--timeout S]]",
     "Show a promotion: state, gates, approvals, rollout. Exits 3 when it was rejected,\n"
     "aborted or rolled back; with --wait, follows it until it ends (4 on timeout).\n",
     status_opts, 1, 1, mgc_cmd_status},
    {"approve", "ID [--comment TEXT]", "Approve a promotion awaiting approval.\n", comment_opts, 1,
     1, mgc_cmd_approve},
    {"reject", "ID --comment TEXT", "Reject a promotion awaiting approval, saying why.\n",
     comment_opts, 1, 1, mgc_cmd_reject},
    {"abort", "ID [--reason TEXT]", "Abort a promotion; the alias goes back to its baseline.\n",
     abort_opts, 1, 1, mgc_cmd_abort},
    {"lkg", "MODEL --alias A [--format json|env|version]",
     "Print the last-known-good version of MODEL on alias A. --format env prints\n"
     "MODEL_VERSION=, MODEL_ARTIFACT= and MODEL_IMAGE= lines, quoted for the shell:\n"
     "  eval \"$(modelgate lkg fraud --alias production --format env)\"\n"
     "--format version prints the number alone.\n",
     lkg_opts, 1, 1, mgc_cmd_lkg},
    {"rollback", "MODEL --alias A --reason TEXT [--wait S]",
     "Move alias A back to its last-known-good version (no gates). With --wait S, wait up\n"
     "to S seconds for every gateway to apply it: exits 4 if some have not.\n",
     rollback_opts, 1, 1, mgc_cmd_rollback},
    {"pull", "MODEL (N|@ALIAS) -o DIR [--key pub.pem] [--max-archive-ratio N] [--allow-unsafe]",
     "Download a version (or the version holding most of ALIAS's traffic), verify its\n"
     "artifact digest and its signature (with the server's published key, or --key\n"
     "offline) and every file's digest, then extract it safely into DIR, which must not\n"
     "exist or be empty. Nothing lands in DIR unless everything verified. A DIR that\n"
     "already holds exactly that version, as signed, is left as it is (exit 0). A single-file\n"
     "artifact is written as DIR/artifact. An archive expanding more than\n"
     "--max-archive-ratio N times its size (default 200; 0 = no cap; applies past 32 MiB)\n"
     "is refused before anything is extracted, and so is one that would not fit in the\n"
     "free space of DIR's file system. An artifact the server's safety scan did not find\n"
     "clean (unsafe, unknown, or never scanned) is refused unless --allow-unsafe.\n",
     pull_opts, 2, 2, mgc_cmd_pull},
    {"models", "[--q TEXT]",
     "List the models (whose names contain TEXT): latest version and aliases' routes.\n",
     models_opts, 0, 0, mgc_cmd_models},
    {"promotions", "[--state S] [--model M] [--alias A]",
     "List promotions, newest first: id, model, alias, version, state. --state is one of\n"
     "evaluating, awaiting_approval, rolling_out, succeeded, rejected, aborted, rolled_back.\n",
     promotions_opts, 0, 0, mgc_cmd_promotions},
    {"alias", "set MODEL ALIAS (N | V=W,V=W...) [--wait S]",
     "Route alias ALIAS of MODEL: to version N alone, or split by integer weights summing\n"
     "to 100 (1=90,2=10). An alias a policy protects moves only through promotions. With\n"
     "--wait S (at most 60), wait for the gateways to apply it: exits 4 if some have not.\n",
     alias_opts, 4, 4, mgc_cmd_alias},
    {"token", "create NAME --role R [--role R] [--team T] [--alias A]",
     "Create a token (admin). Prints its secret alone on stdout, once: keep it. Roles:\n"
     "reader, publisher, reviewer, deployer, admin. --team limits it to teams' models,\n"
     "--alias a deployer to aliases (patterns like dev-* allowed); each may repeat.\n",
     token_opts, 2, 2, mgc_cmd_token},
    {"verify", "BUNDLE --key pub.pem PATH [--max-archive-ratio N]",
     "Verify a signature bundle offline against PATH: a directory (the extracted model),\n"
     "an archive, or a single-file artifact. No server is contacted.\n",
     verify_opts, 1, 2, mgc_cmd_verify},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* ---- main --------------------------------------------------------------------------------- */

static void print_overview(FILE *f)
{
    size_t i;

    fputs("modelgate - command-line client for the modelgate model registry\n\n"
          "usage: modelgate COMMAND [ARGS] [--json] [--help]\n\ncommands:\n",
          f);
    for (i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].synopsis);
    fputs("\n--json prints machine-readable JSON on stdout; otherwise output is for people.\n"
          "The server and token come from `modelgate login`, or MODELGATE_URL and\n"
          "MODELGATE_TOKEN.\n" EXIT_CODES,
          f);
}

static void print_help(const struct mgc_cmd *cmd)
{
    printf("usage: modelgate %s %s\n\n%s\n  --json  machine-readable output\n  --help  this text\n"
           "%s",
           cmd->name, cmd->synopsis, cmd->help, EXIT_CODES);
}

int main(int argc, char **argv)
{
    struct mgc c;
    struct mgc_args a;
    const struct mgc_cmd *cmd = NULL;
    size_t i;
    int rc;

    if (argc < 2) {
        print_overview(stderr);
        return MGC_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        print_overview(stdout);
        return MGC_OK;
    }
    for (i = 0; i < NCOMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            cmd = &commands[i];
    }
    if (cmd == NULL) {
        fprintf(stderr, "modelgate: unknown command '%s'\n\n", argv[1]);
        print_overview(stderr);
        return MGC_USAGE;
    }
    memset(&c, 0, sizeof(c));
    c.cmd = cmd;
    rc = mgc_args_parse(cmd, argc - 2, argv + 2, &a);
    if (rc == MGC_OK && mgc_flag(&a, "help")) {
        print_help(cmd);
    } else if (rc == MGC_OK) {
        c.json = mgc_flag(&a, "json");
        c.tty = isatty(STDERR_FILENO) == 1;
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            rc = mgc_fail("cannot initialise libcurl");
        } else {
            rc = cmd->run(&c, &a);
            mgc_http_release(&c);
            curl_global_cleanup();
        }
    }
    mgc_args_release(&a);
    free(c.url);
    if (c.token != NULL) {
        memset(c.token, 0, strlen(c.token));
        free(c.token);
    }
    if (fflush(stdout) != 0 && rc == MGC_OK)
        rc = mgc_fail("cannot write the output");
    return rc;
}
