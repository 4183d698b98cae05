// The fused AdamW step (fused_adamw.h). Compiled with -ffp-contract=off
// (sdk/CMakeLists.txt): the only fused multiply-adds are the ones written
// out below, where LibTorch's kernels have them.
#include "exogym/sdk/internal/fused_adamw.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "exogym/sdk/internal/optim_state_key.h"
#include "exogym/sdk/stacked.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define EXOGYM_FUSED_ADAMW 1
#else
#define EXOGYM_FUSED_ADAMW 0
#endif

namespace exogym::sdk::internal {

namespace {

// A step's scalars, rounded to float as LibTorch rounds them.
struct Coefficients {
  float decay;  // 1 - lr * weight_decay
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float sqrt_bias_correction2;
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^step)
};

Coefficients coefficients_of(const torch::optim::AdamWOptions& o, int64_t step) {
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
  return {static_cast<float>(1 - o.lr() * o.weight_decay()),
          static_cast<float>(beta1),
          static_cast<float>(1 - beta1),
          static_cast<float>(beta2),
          static_cast<float>(1 - beta2),
          static_cast<float>(std::sqrt(bias_correction2)),
          static_cast<float>(o.eps()),
          static_cast<float>(-(o.lr() / bias_correction1))};
}

#if EXOGYM_FUSED_ADAMW
// LibTorch's AdamW, element by element, as its AVX2 and AVX-512 kernels
// compute it (their scalar tails contract to the same FMAs):
//   p = p * decay
//   m = fma(g, 1 - beta1, m * beta1)              exp_avg.mul_(beta1).add_(g, 1 - beta1)
//   v = fma((1 - beta2) * g, g, v * beta2)        exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2)
//   d = sqrt(v) / sqrt(bc2) + eps                 (exp_avg_sq.sqrt() / sqrt(bc2)).add_(eps)
//   p = p + (-step_size * m) / d                  p.addcdiv_(exp_avg, d, -step_size)
// Written once for both vector widths: OP(name) is _mm256_name_ps or
// _mm512_name_ps. Each element's result does not depend on the width; the
// AVX-512 loop is 1.8x faster on the development machine (two divisions
// and a square root per element bound it).
#define EXOGYM_ADAMW_LANES(OP)                                      \
  P = OP(mul)(P, decay);                                            \
  M = OP(fmadd)(G, one_minus_beta1, OP(mul)(M, beta1));             \
  V = OP(fmadd)(OP(mul)(one_minus_beta2, G), G, OP(mul)(V, beta2)); \
  P = OP(add)(P, OP(div)(OP(mul)(neg_step, M), OP(add)(OP(div)(OP(sqrt)(V), sqrt_bc2), eps)))
#define EXOGYM_ADAMW_CONSTANTS(OP)                                                                                \
  const auto decay = OP(set1)(c.decay), beta1 = OP(set1)(c.beta1), one_minus_beta1 = OP(set1)(c.one_minus_beta1), \
             beta2 = OP(set1)(c.beta2), one_minus_beta2 = OP(set1)(c.one_minus_beta2),                            \
             sqrt_bc2 = OP(set1)(c.sqrt_bias_correction2), eps = OP(set1)(c.eps), neg_step = OP(set1)(c.neg_step_size)
#define EXOGYM_PS256(name) _mm256_##name##_ps
#define EXOGYM_PS512(name) _mm512_##name##_ps

// kFresh: the moments' first step, which reads them as the zeros LibTorch
// would have filled them with (the same bits) without touching memory twice.
// The last group of fewer lanes than the width goes through the same
// arithmetic, its missing lanes masked out.
template <bool kFresh>
__attribute__((target("avx2,fma"))) void update_avx2(float* p, const float* g, float* m, float* v, int64_t n,
                                                     const Coefficients& c) {
  EXOGYM_ADAMW_CONSTANTS(EXOGYM_PS256);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), all_lanes = _mm256_set1_epi32(-1);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i mask = i + 8 <= n ? all_lanes : _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), lane);
    __m256 P = _mm256_maskload_ps(p + i, mask), G = _mm256_maskload_ps(g + i, mask);
    __m256 M = kFresh ? _mm256_setzero_ps() : _mm256_maskload_ps(m + i, mask);
    __m256 V = kFresh ? _mm256_setzero_ps() : _mm256_maskload_ps(v + i, mask);
    EXOGYM_ADAMW_LANES(EXOGYM_PS256);
    _mm256_maskstore_ps(p + i, mask, P);
    _mm256_maskstore_ps(m + i, mask, M);
    _mm256_maskstore_ps(v + i, mask, V);
  }
}

// GCC 12's own _mm512_sqrt_ps trips its -Wmaybe-uninitialized (the
// undefined vector it passes as the masked-off source).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <bool kFresh>
__attribute__((target("avx512f"))) void update_avx512(float* p, const float* g, float* m, float* v, int64_t n,
                                                      const Coefficients& c) {
  EXOGYM_ADAMW_CONSTANTS(EXOGYM_PS512);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = i + 16 <= n ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    __m512 P = _mm512_maskz_loadu_ps(mask, p + i), G = _mm512_maskz_loadu_ps(mask, g + i);
    __m512 M = kFresh ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, m + i);
    __m512 V = kFresh ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, v + i);
    EXOGYM_ADAMW_LANES(EXOGYM_PS512);
    _mm512_mask_storeu_ps(p + i, mask, P);
    _mm512_mask_storeu_ps(m + i, mask, M);
    _mm512_mask_storeu_ps(v + i, mask, V);
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

using Update = void (*)(float*, const float*, float*, float*, int64_t, const Coefficients&);

// The widest kernel this CPU runs, for fresh and for existing moments;
// null without FMA.
std::pair<Update, Update> kernels() {
  if (__builtin_cpu_supports("avx512f")) return {update_avx512<true>, update_avx512<false>};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {update_avx2<true>, update_avx2<false>};
  return {nullptr, nullptr};
}
#else
using Update = void (*)(float*, const float*, float*, float*, int64_t, const Coefficients&);
std::pair<Update, Update> kernels() { return {nullptr, nullptr}; }
#endif

bool plain_cpu_float(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == at::kFloat && t.layout() == at::kStrided &&
         t.is_contiguous() && t.sizes() == like.sizes();
}

// The probe's tensors: deterministic values from their own generator (the
// run's seeded generators are not touched), with zeros of both signs.
at::Tensor probe_tensor(std::mt19937& generator, int64_t n) {
  std::normal_distribution<float> normal;
  at::Tensor t = at::empty({n}, at::kFloat);
  float* data = t.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) data[i] = normal(generator);
  data[0] = 0.0f;
  data[n - 1] = -0.0f;
  return t;
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && std::memcmp(a.data_ptr<float>(), b.data_ptr<float>(), a.nbytes()) == 0;
}

}  // namespace

bool FusedAdamW::switched_on() {
  // A switch for comparing with LibTorch's own step (docs/performance.md).
  static const bool on = [] {
    const char* setting = std::getenv("EXOGYM_FUSED_ADAMW");
    return !(setting && std::strcmp(setting, "0") == 0);
  }();
  return on;
}

bool FusedAdamW::on_device() const {
  for (const auto& group : param_groups()) {
    for (const auto& p : group.params()) {
      if (p.grad().defined()) return !p.device().is_cpu();
    }
  }
  return false;
}

bool FusedAdamW::available() {
  static const bool agrees = [] {
    if (!switched_on() || !kernels().first) return false;
    at::NoGradGuard no_grad;
    std::mt19937 generator(20261124);
    // Tails under 8, 16 and 32 lanes, and enough elements (about 4,000 over
    // six steps of gradients from 1e-6 to 1e3) that a LibTorch rounding
    // some operation differently shows: 2.11's AdamW agreed on 80 elements
    // over three steps and differed on larger tensors.
    const std::vector<int64_t> sizes = {13, 67, 4099};
    std::vector<at::Tensor> theirs, ours;
    for (int64_t n : sizes) {
      at::Tensor start = probe_tensor(generator, n);
      theirs.push_back(start.clone().requires_grad_(true));
      ours.push_back(start.clone().requires_grad_(true));
    }
    const auto options = torch::optim::AdamWOptions(0.01).betas({0.8, 0.95}).eps(1e-3).weight_decay(0.1);
    torch::optim::AdamW reference(theirs, options);
    FusedAdamW fused(ours, options);
    const double scales[] = {1.0, 1e-3, 1e3, 1e-6, 1.0, 1e3};
    for (int step = 0; step < 6; ++step) {
      if (step == 3) {  // as a schedule would, between steps
        reference.param_groups()[0].options().set_lr(0.003);
        fused.param_groups()[0].options().set_lr(0.003);
      }
      for (size_t i = 0; i < sizes.size(); ++i) {
        at::Tensor grad = probe_tensor(generator, sizes[i]).mul_(scales[step]);
        theirs[i].mutable_grad() = grad.clone();
        ours[i].mutable_grad() = grad;
      }
      reference.step();
      if (!fused.fused_step()) return false;
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto& a = static_cast<torch::optim::AdamWParamState&>(
          *reference.state().at(optimizer_state_key(reference.state(), theirs[i])));
      auto& b =
          static_cast<torch::optim::AdamWParamState&>(*fused.state().at(optimizer_state_key(fused.state(), ours[i])));
      if (!same_bits(theirs[i], ours[i]) || !same_bits(a.exp_avg(), b.exp_avg()) ||
          !same_bits(a.exp_avg_sq(), b.exp_avg_sq()) || a.step() != b.step())
        return false;
    }
    return true;
  }();
  return agrees;
}

// Elements per chunk of a step shared among threads: a whole number of
// vectors (the vector loop runs as over the whole tensor), and the chunk's
// four tensors (1 MiB) within a core's cache.
constexpr int64_t kChunk = int64_t{1} << 16;

bool FusedAdamW::fused_step() {
  // Every parameter with a gradient and its state, looked up once; nothing
  // changes until all of them can take the fused step.
  using Key = std::decay_t<decltype(state())>::key_type;
  struct Item {
    at::Tensor param;
    const torch::optim::AdamWOptions* options;
    Key key;
    torch::optim::AdamWParamState* state;  // null: created by this step
  };
  std::vector<Item> items;
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    if (options.amsgrad()) return false;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (!plain_cpu_float(p, p) || !plain_cpu_float(p.grad(), p)) return false;
      Key key = optimizer_state_key(state(), p);
      auto it = state().find(key);
      torch::optim::AdamWParamState* existing = nullptr;
      if (it != state().end()) {
        existing = static_cast<torch::optim::AdamWParamState*>(it->second.get());
        if (!plain_cpu_float(existing->exp_avg(), p) || !plain_cpu_float(existing->exp_avg_sq(), p)) return false;
      }
      items.push_back({p, &options, std::move(key), existing});
    }
  }
  static const std::pair<Update, Update> chosen = kernels();
  for (auto& item : items) {
    const at::Tensor& p = item.param;
    const bool fresh = item.state == nullptr;
    if (fresh) {
      // LibTorch fills new moments with zeros; the fresh update writes
      // them in its one pass instead.
      auto created = std::make_unique<torch::optim::AdamWParamState>();
      created->step(0);
      created->exp_avg(at::empty_like(p, at::MemoryFormat::Contiguous));
      created->exp_avg_sq(at::empty_like(p, at::MemoryFormat::Contiguous));
      item.state = created.get();
      state()[item.key] = std::move(created);
    }
    auto& s = *item.state;
    s.step(s.step() + 1);
    const Coefficients c = coefficients_of(*item.options, s.step());
    const Update update = fresh ? chosen.first : chosen.second;
    float *param = p.data_ptr<float>(), *exp_avg = s.exp_avg().data_ptr<float>(),
          *exp_avg_sq = s.exp_avg_sq().data_ptr<float>();
    const float* grad = p.grad().data_ptr<float>();
    const int64_t n = p.numel();
    NodeWorkers* workers = node_workers();
    if (!workers || n < 2 * kChunk) {
      update(param, grad, exp_avg, exp_avg_sq, n, c);
      continue;
    }
    // A stack's step shared among the workers, chunk by chunk: each
    // element's update is its own, so the chunks change no bit.
    workers->run((n + kChunk - 1) / kChunk, [&](int64_t i) {
      const int64_t at = i * kChunk;
      update(param + at, grad + at, exp_avg + at, exp_avg_sq + at, std::min(kChunk, n - at), c);
    });
  }
  return true;
}

at::Tensor FusedAdamW::step(LossClosure closure) {
  // A closure makes the gradients only inside step(): LibTorch's path.
  last_step_fused_ = false;
  if (!closure && switched_on()) {
    at::NoGradGuard no_grad;
    last_step_fused_ = on_device() ? multi_tensor_step() : available() && fused_step();
  }
  if (!last_step_fused_) return torch::optim::AdamW::step(std::move(closure));
  return {};
}

}  // namespace exogym::sdk::internal
