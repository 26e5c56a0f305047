/*
 * cost.c - throughput and cost per thousand requests (see cost.h).
 */
#include "cost.h"

#include <math.h>

bool gate_throughput(double reported, size_t samples, double wall_s, double *rps)
{
    *rps = 0;
    if (isfinite(reported) && reported > 0) {
        *rps = reported;
        return true;
    }
    if (samples == 0 || !isfinite(wall_s) || wall_s <= 0)
        return false;
    *rps = (double)samples / wall_s;
    return isfinite(*rps) && *rps > 0;
}

bool gate_cost_per_1k(double cost_per_hour, double rps, double *out)
{
    *out = 0;
    if (!isfinite(cost_per_hour) || cost_per_hour < 0 || !isfinite(rps) || rps <= 0)
        return false;
    *out = cost_per_hour / (3.6 * rps);
    return isfinite(*out);
}
