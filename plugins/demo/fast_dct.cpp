#include "demo/fast_dct.h"

#include <cmath>
#include <utility>

#include "exogym/modules/internal/cpu_dispatch.h"

namespace exogym::modules::demo::detail {

namespace {

// Lengths up to this are done directly: below it a split costs more in
// passes than it saves in products.
constexpr int64_t kDirectUpTo = 4;

// Lengths up to this are done on a strip in registers (StripKernel).
constexpr int kRegistersUpTo = 16;

// Strip values only live inside always-inlined code, so the ABI note
// GCC gives for passing wide vectors does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// kStrip floats as one value (GCC/Clang vector extension): one AVX-512
// register, two AVX2 ones, four SSE ones; at any address.
constexpr int64_t kStrip = DctPlan::kStrip;
using Strip = float __attribute__((vector_size(kStrip * sizeof(float)), aligned(alignof(float)), may_alias));

EXOGYM_INLINE Strip load(const float* p) { return *reinterpret_cast<const Strip*>(p); }
EXOGYM_INLINE void store(float* p, Strip v) { *reinterpret_cast<Strip*>(p) = v; }

// Transposes the kStrip x kStrip block held in rows[]: stage H swaps bit H
// of the row index with bit H of the column index, with one two-input
// shuffle per row (vpermt2ps and the like on AVX-512). Of rows r (without
// bit H) and r | H, the first takes columns c ^ H of the second where c
// has bit H, the second columns c ^ H of the first where c has not.
template <int H, size_t... C>
EXOGYM_INLINE Strip shuffle_low(Strip a, Strip b, std::index_sequence<C...>) {
  return __builtin_shufflevector(a, b, ((C & H) ? kStrip + (C ^ H) : C)...);
}

template <int H, size_t... C>
EXOGYM_INLINE Strip shuffle_high(Strip a, Strip b, std::index_sequence<C...>) {
  return __builtin_shufflevector(a, b, ((C & H) ? kStrip + C : (C ^ H))...);
}

template <int H>
EXOGYM_INLINE void swap_index_bit(Strip* rows) {
  constexpr auto columns = std::make_index_sequence<kStrip>();
  for (int r = 0; r < kStrip; ++r) {
    if (r & H) continue;
    const Strip a = rows[r], b = rows[r | H];
    rows[r] = shuffle_low<H>(a, b, columns);
    rows[r | H] = shuffle_high<H>(a, b, columns);
  }
}

// out row k = sum_j basis[k][j] * in row j on one strip, for odd lengths
// above kRegistersUpTo.
EXOGYM_INLINE void direct_any_strip(int64_t n, const float* basis, const float* in, int64_t in_stride, float* out,
                                    int64_t out_stride) {
  for (int64_t k = 0; k < n; ++k) {
    const float* c = basis + k * n;
    Strip sum = c[0] * load(in);
    for (int64_t j = 1; j < n; ++j) sum += c[j] * load(in + j * in_stride);
    store(out + k * out_stride, sum);
  }
}

}  // namespace

// Lengths up to kRegistersUpTo on one strip, with every value in registers
// (or spilled to the stack by the compiler): the recursion unrolled at
// compile time, no passes through scratch and no calls.
struct StripKernel {
  template <int N>
  static EXOGYM_INLINE void run(Strip* x, const DctPlan& plan) {
    if constexpr (N % 2 == 1 || N <= kDirectUpTo) {
      Strip y[N];
      for (int k = 0; k < N; ++k) {
        const float* c = plan.basis_.data() + k * N;
        y[k] = c[0] * x[0];
        for (int j = 1; j < N; ++j) y[k] += c[j] * x[j];
      }
      for (int k = 0; k < N; ++k) x[k] = y[k];
    } else {
      constexpr int H = N / 2;
      Strip sums[H], differences[H];
      for (int j = 0; j < H; ++j) {
        sums[j] = x[j] + x[N - 1 - j];
        differences[j] = (x[j] - x[N - 1 - j]) * plan.inverse_cos_[j];
      }
      run<H>(sums, *plan.half_);
      run<H>(differences, *plan.half_);
      for (int k = 0; k < H; ++k) x[2 * k] = sums[k];
      for (int k = 0; k + 1 < H; ++k) x[2 * k + 1] = differences[k] + differences[k + 1];
      x[N - 1] = differences[H - 1];
    }
  }

  template <int N>
  static EXOGYM_INLINE void load_run_store(const DctPlan& plan, const float* in, int64_t in_stride, float* out,
                                           int64_t out_stride) {
    Strip x[N];
    for (int j = 0; j < N; ++j) x[j] = load(in + j * in_stride);
    run<N>(x, plan);
    for (int k = 0; k < N; ++k) store(out + k * out_stride, x[k]);
  }

  // Calls load_run_store<n> for the plan's length n (<= kRegistersUpTo).
  template <int N = 1>
  static EXOGYM_INLINE void dispatch(const DctPlan& plan, const float* in, int64_t in_stride, float* out,
                                     int64_t out_stride) {
    if constexpr (N <= kRegistersUpTo) {
      if (plan.n_ == N) return load_run_store<N>(plan, in, in_stride, out, out_stride);
      dispatch<N + 1>(plan, in, in_stride, out, out_stride);
    }
  }
};

DctPlan::DctPlan(int64_t n)
    : n_(n),
      scale0_(static_cast<float>(std::sqrt(1.0 / static_cast<double>(n)))),
      scale_(static_cast<float>(std::sqrt(2.0 / static_cast<double>(n)))) {
  const double N = static_cast<double>(n);
  if (n % 2 == 1 || n <= kDirectUpTo) {
    basis_.resize(n * n);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < n; ++j)
        basis_[k * n + j] = static_cast<float>(std::cos(M_PI * static_cast<double>((2 * j + 1) * k) / (2.0 * N)));
    return;
  }
  // X_2k = DCT_{n/2}(x_j + x_{n-1-j})_k, and with
  // w_j = (x_j - x_{n-1-j}) / (2 cos(pi (2j+1) / 2n)) and W = DCT_{n/2}(w):
  // X_{2k+1} = W_k + W_{k+1} (W_{n/2} = 0), from
  // 2 cos(t) cos((2k+1) t) = cos(2k t) + cos((2k+2) t).
  for (int64_t j = 0; j < n / 2; ++j)
    inverse_cos_.push_back(
        static_cast<float>(1.0 / (2.0 * std::cos(M_PI * static_cast<double>(2 * j + 1) / (2.0 * N)))));
  half_ = std::make_unique<DctPlan>(n / 2);
}

DctPlan::~DctPlan() = default;

int64_t DctPlan::strip_scratch_floats() const {
  if (n_ <= kRegistersUpTo || !half_) return 0;
  // The sums and the differences, the transformed differences, and what
  // the half-length plan needs.
  return 2 * n_ * kStrip + half_->strip_scratch_floats();
}

int64_t DctPlan::scratch_floats() const { return 2 * n_ * kStrip + strip_scratch_floats(); }

EXOGYM_CLONED void DctPlan::transform_strip(const float* in, int64_t in_stride, float* out, int64_t out_stride,
                                            float* scratch) const {
  if (n_ <= kRegistersUpTo) return StripKernel::dispatch(*this, in, in_stride, out, out_stride);
  if (!half_) return direct_any_strip(n_, basis_.data(), in, in_stride, out, out_stride);
  const int64_t h = n_ / 2;
  float* sums = scratch;
  float* differences = scratch + h * kStrip;
  float* transformed = scratch + n_ * kStrip;
  float* rest = scratch + 2 * n_ * kStrip;
  for (int64_t j = 0; j < h; ++j) {
    const Strip a = load(in + j * in_stride), b = load(in + (n_ - 1 - j) * in_stride);
    store(sums + j * kStrip, a + b);
    store(differences + j * kStrip, (a - b) * inverse_cos_[j]);
  }
  half_->transform_strip(sums, kStrip, out, 2 * out_stride, rest);
  half_->transform_strip(differences, kStrip, transformed, kStrip, rest);
  for (int64_t k = 0; k + 1 < h; ++k)
    store(out + (2 * k + 1) * out_stride, load(transformed + k * kStrip) + load(transformed + (k + 1) * kStrip));
  store(out + (n_ - 1) * out_stride, load(transformed + (h - 1) * kStrip));
}

void DctPlan::apply(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t m,
                    float* scratch) const {
  // Strips of kStrip columns, each pass over a row of a strip one vector
  // operation and a strip's scratch in L1.
  float* padded_in = scratch;
  float* padded_out = scratch + n_ * kStrip;
  float* rest = scratch + 2 * n_ * kStrip;
  int64_t s = 0;
  for (; s + kStrip <= m; s += kStrip) {
    // The next strip's rows are n cache lines far apart, a pattern the
    // hardware prefetchers miss: ask for them while this one is computed.
    if (s + 2 * kStrip <= m)
      for (int64_t j = 0; j < n_; ++j) __builtin_prefetch(in + j * in_stride + s + kStrip);
    transform_strip(in + s, in_stride, out + s, out_stride, rest);
  }
  if (s == m) return;
  // The last columns, fewer than a strip: padded with zeros to one.
  const int64_t w = m - s;
  for (int64_t j = 0; j < n_; ++j)
    for (int64_t i = 0; i < kStrip; ++i) padded_in[j * kStrip + i] = i < w ? in[j * in_stride + s + i] : 0.f;
  transform_strip(padded_in, kStrip, padded_out, kStrip, rest);
  for (int64_t k = 0; k < n_; ++k)
    for (int64_t i = 0; i < w; ++i) out[k * out_stride + s + i] = padded_out[k * kStrip + i];
}

EXOGYM_CLONED void transpose(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t rows,
                             int64_t columns) {
  int64_t r0 = 0;
  for (; r0 + kStrip <= rows; r0 += kStrip) {
    int64_t c0 = 0;
    for (; c0 + kStrip <= columns; c0 += kStrip) {
      Strip block[kStrip];
      for (int r = 0; r < kStrip; ++r) block[r] = load(in + (r0 + r) * in_stride + c0);
      swap_index_bit<8>(block);
      swap_index_bit<4>(block);
      swap_index_bit<2>(block);
      swap_index_bit<1>(block);
      for (int c = 0; c < kStrip; ++c) store(out + (c0 + c) * out_stride + r0, block[c]);
    }
    for (int64_t c = c0; c < columns; ++c)
      for (int64_t r = r0; r < r0 + kStrip; ++r) out[c * out_stride + r] = in[r * in_stride + c];
  }
  for (int64_t c = 0; c < columns; ++c)
    for (int64_t r = r0; r < rows; ++r) out[c * out_stride + r] = in[r * in_stride + c];
}

}  // namespace exogym::modules::demo::detail
