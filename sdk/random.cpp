#include "exogym/sdk/random.h"

#include <ATen/CPUGeneratorImpl.h>

namespace exogym::sdk {

namespace {

// splitmix64 (Steele, Lea and Flood 2014): one increment and its finaliser.
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t derive_seed(uint64_t seed, uint64_t stream, uint64_t step) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ step);
}

at::Generator shared_generator(uint64_t run_seed, uint64_t stream, uint64_t step) {
  return at::detail::createCPUGenerator(derive_seed(run_seed, stream, step));
}

}  // namespace exogym::sdk
