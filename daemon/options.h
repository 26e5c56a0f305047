/*
 * options.h - modelgated's options: one table (daemon/options.c) gives the
 * flags ("--key value", "--key=value"), the config file lines ("key = value",
 * keys being the long flag names) and the usage text together, like nginx's
 * ngx_command_t rows. The record they fill is model/config.h.
 */
#ifndef DAEMON_OPTIONS_H
#define DAEMON_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "../base/mg.h"
#include "../model/config.h"

/* Apply argv (after the subcommand, if any) to cfg, which srv_config_init
 * filled. --config FILE is read where it appears; later flags override it.
 * MG_EINVAL with a message naming the option (err->field: its name) on bad
 * input; cfg then holds what was applied before it (release it either way). */
enum mg_code srv_options_parse(struct srv_config *cfg, int argc, char **argv, struct mg_error *err);

/* Write the usage text for --help: every option of the table, then the
 * subcommands. Returns 0, or EOF when writing failed. */
int srv_options_usage(FILE *out);

/* The name (without "--") of the i-th option in the table, in usage order;
 * NULL past the last. For tests and tools that check every option. */
const char *srv_options_name(size_t i);

#endif
