#pragma once
// Seeds derived from the run's seed. Every random draw of a run follows from
// the manifest's "seed" through derive_seed, one stream per purpose, so runs
// reproduce bit for bit and no two purposes share random numbers.
#include <ATen/core/Generator.h>

#include <cstdint>

namespace exogym::sdk {

// A well-spread 64-bit seed for purpose `stream` at `step` (a round, a call,
// a node): splitmix64 applied over (seed, stream, step) in turn, so nearby
// inputs (seed 1 and 2, streams 0 and 1) give unrelated seeds. Pick a stream
// constant per purpose, e.g. the ASCII of a name ("FEDAVG" = 0x464544415647).
uint64_t derive_seed(uint64_t seed, uint64_t stream, uint64_t step = 0);

// A CPU generator seeded with derive_seed(run_seed, stream, step). It is the
// same on every node, so strategies draw shared randomness from it (SPARTA's
// masks, FedAvg's islands) instead of communicating it.
at::Generator shared_generator(uint64_t run_seed, uint64_t stream, uint64_t step);

}  // namespace exogym::sdk
