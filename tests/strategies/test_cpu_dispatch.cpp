// The modules' hot loops are compiled once per CPU kind
// (plugins/modules/internal/cpu_dispatch.h); every kind must compute the
// same bits, or a run's results depend on the machine (DeMo's did, on
// AVX-512: its clone fused multiply-adds).
#include <cstring>

#include "exogym/modules/internal/cpu_dispatch.h"
#include "testing.h"

namespace {

// a * b - c with a = b = 1 + 2^-12 and c = 1 + 2^-11: a * b rounded to a
// float is c, so the unfused result is 0; a fused multiply-add keeps the
// product's 2^-24 and returns that.
EXOGYM_CLONED float cloned_multiply_subtract(float a, float b, float c) { return a * b - c; }

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("fma"))) float fma_target_multiply_subtract(float a, float b, float c) { return a * b - c; }
#endif

// Keeps the compiler from folding the products at compile time.
float opaque(float x) {
  volatile float v = x;
  return v;
}

}  // namespace

TEST_CASE("the modules' CPU clones compute the same bits: no multiply-add is fused", "[modules]") {
  const float a = opaque(1.0f + 0x1p-12f), c = opaque(1.0f + 0x1p-11f);
  REQUIRE(a * a == c);  // the product's rounding the test relies on
  // The clone this CPU runs (AVX-512, AVX2 or plain x86-64).
  CHECK(cloned_multiply_subtract(a, a, c) == 0.0f);
#if defined(__GNUC__) && defined(__x86_64__)
  // Any code compiled for a CPU with FMA, whatever clone this CPU picks.
  if (__builtin_cpu_supports("fma")) CHECK(fma_target_multiply_subtract(a, a, c) == 0.0f);
#endif
}
