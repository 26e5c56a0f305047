/*
 * schema.h - input/output schema compatibility between a candidate and its baseline
 * (docs/contract.md "Artifact introspection and schema compatibility", gate kind "schema"). Pure
 * functions on JSON; thread-safe.
 *
 * A schema is {"inputs":[{"name","dtype","shape","optional"?}],"outputs":[…]}; a shape is an
 * array of integers (-1: any) and strings (symbolic: any), or null (rank unknown: any).
 */
#ifndef GATE_SCHEMA_H
#define GATE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Two shapes can describe the same tensors: either is null, or the ranks are equal and
 * each pair of dimensions is equal, or one of them is -1 or a name. */
bool gate_shape_compatible(const json_t *a, const json_t *b);

/*
 * Every difference between baseline and candidate, in order (inputs, then outputs), as a
 * NEW array of {"kind","name","breaking":bool,"baseline":{"dtype","shape"}|null,
 * "candidate":{…}|null}. Kinds: input_missing, input_dtype, input_shape, input_added,
 * output_missing, output_dtype, output_shape, output_added. Breaking: a baseline input
 * missing or changed in dtype or shape, a new required input, a baseline output missing or
 * changed in dtype. A new optional input, a new output and an output's new shape are not.
 */
json_t *gate_schema_diff(const json_t *baseline, const json_t *candidate);

/*
 * True when the candidate may replace the baseline. Otherwise `detail` (cap bytes) names
 * the first breaking difference, e.g. "input 'image' of the baseline is missing from the
 * candidate (renamed to 'pixels'?)".
 */
bool gate_schema_compatible(const json_t *baseline, const json_t *candidate, char *detail,
                            size_t cap);

/*
 * A trainer's declared io_schema against the schema the server read from the artifact:
 * every declared input and output exists there with the same dtype and a compatible shape,
 * and every output and required input read is declared. False with `detail` naming the first
 * disagreement.
 */
bool gate_schema_agree(const json_t *read, const json_t *declared, char *detail, size_t cap);

/* A Version's schema: its introspection's inputs and outputs when the server read them,
 * else the io_schema its trainer declared. NEW {"inputs","outputs"}, or NULL. */
json_t *gate_version_schema(const json_t *version);

#endif
