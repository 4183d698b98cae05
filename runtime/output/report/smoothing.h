#pragma once
// Smoothing of a noisy curve (the per-step train loss) for the report's
// smoothing control, as Weights & Biases smooths a line.
#include <vector>

namespace exogym::runtime::output::report {

// The exponential moving average of `y` with `weight` in [0, 1): each point
// is last = weight * last + (1 - weight) * y, divided by 1 - weight^n (n:
// the finite values so far), so that the first points are not pulled
// toward 0. A non-finite value stays non-finite and does not enter the
// average. Weight 0 returns `y`. Linear in `y`, so a band's spread is
// smoothed the same way.
std::vector<double> ema_smoothed(const std::vector<double>& y, double weight);

}  // namespace exogym::runtime::output::report
