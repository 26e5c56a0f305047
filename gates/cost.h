/*
 * cost.h - what serving a version costs (docs/contract.md "Quotas and cost"): the throughput a
 * smoke test measured and the cost per thousand requests of the machine it ran on.
 *
 * Pure: no I/O, no clock. Thread-safe.
 */
#ifndef GATE_COST_H
#define GATE_COST_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Requests per second of a smoke test: `reported` when the test measured it itself (a
 * finite number > 0; pass a negative or NaN value when it did not), else `samples`
 * (requests timed in latencies_ms) over the test's wall time `wall_s`. False when neither
 * gives a finite rate > 0 (*rps is then 0).
 */
bool gate_throughput(double reported, size_t samples, double wall_s, double *rps);

/*
 * Cost per thousand requests at `rps` requests per second on a machine that costs
 * `cost_per_hour` (any currency unit): cost ÷ (3.6 × rps), since an hour serves
 * 3600 × rps requests. False when rps is not > 0 or the cost is not a finite number >= 0.
 */
bool gate_cost_per_1k(double cost_per_hour, double rps, double *out);

#endif
