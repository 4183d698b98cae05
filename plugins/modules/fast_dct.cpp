#include "fast_dct.h"

#include <cmath>

// apply() is compiled for AVX-512, AVX2 and plain x86-64, and the best one
// the CPU has is picked when the library loads: a build for the lowest
// common CPU would run its row passes 4 floats at a time. The passes are
// inlined into it, so each clone has its own.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define EXOGYM_CLONED __attribute__((target_clones("avx512f", "avx2", "default")))
#define EXOGYM_INLINE inline __attribute__((always_inline))
#else
#define EXOGYM_CLONED
#define EXOGYM_INLINE inline
#endif

namespace exogym::modules::demo::detail {

namespace {

// Lengths up to this are done directly: below it a split costs more in
// passes than it saves in products.
constexpr int64_t kDirectUpTo = 4;

EXOGYM_INLINE void sum_and_scaled_difference(const float* a, const float* b, float* sum, float* difference, float scale,
                                             int64_t m) {
  for (int64_t i = 0; i < m; ++i) {
    sum[i] = a[i] + b[i];
    difference[i] = (a[i] - b[i]) * scale;
  }
}

EXOGYM_INLINE void add(const float* a, const float* b, float* out, int64_t m) {
  for (int64_t i = 0; i < m; ++i) out[i] = a[i] + b[i];
}

EXOGYM_INLINE void copy(const float* a, float* out, int64_t m) {
  for (int64_t i = 0; i < m; ++i) out[i] = a[i];
}

EXOGYM_INLINE void scaled(float s, const float* a, float* out, int64_t m) {
  for (int64_t i = 0; i < m; ++i) out[i] = s * a[i];
}

EXOGYM_INLINE void add_scaled(float s, const float* a, float* out, int64_t m) {
  for (int64_t i = 0; i < m; ++i) out[i] += s * a[i];
}

// out row k = sum_j basis[k][j] * in row j, for a length N known here:
// each output row written once, in one pass reading the N input rows.
template <int N>
EXOGYM_INLINE void direct(const float* basis, const float* in, int64_t in_stride, float* out, int64_t out_stride,
                          int64_t m) {
  for (int k = 0; k < N; ++k) {
    const float* c = basis + k * N;
    float* row = out + k * out_stride;
    for (int64_t i = 0; i < m; ++i) {
      float sum = c[0] * in[i];
#pragma GCC unroll 16
      for (int j = 1; j < N; ++j) sum += c[j] * in[j * in_stride + i];
      row[i] = sum;
    }
  }
}

EXOGYM_INLINE void direct_any(int64_t n, const float* basis, const float* in, int64_t in_stride, float* out,
                              int64_t out_stride, int64_t m) {
  for (int64_t k = 0; k < n; ++k) {
    float* row = out + k * out_stride;
    const float* c = basis + k * n;
    scaled(c[0], in, row, m);
    for (int64_t j = 1; j < n; ++j) add_scaled(c[j], in + j * in_stride, row, m);
  }
}

}  // namespace

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

int64_t DctPlan::scratch_floats(int64_t m) const {
  if (!half_) return 0;
  // The sums and the differences, the transformed differences, and what
  // the half-length plan needs.
  return 2 * n_ * m + half_->scratch_floats(m);
}

EXOGYM_CLONED void DctPlan::apply(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t m,
                                  float* scratch) const {
  if (!half_) {
    const float* c = basis_.data();
    switch (n_) {
      case 1:
        return direct<1>(c, in, in_stride, out, out_stride, m);
      case 2:
        return direct<2>(c, in, in_stride, out, out_stride, m);
      case 3:
        return direct<3>(c, in, in_stride, out, out_stride, m);
      case 4:
        return direct<4>(c, in, in_stride, out, out_stride, m);
      case 5:
        return direct<5>(c, in, in_stride, out, out_stride, m);
      case 7:
        return direct<7>(c, in, in_stride, out, out_stride, m);
      case 9:
        return direct<9>(c, in, in_stride, out, out_stride, m);
      default:
        return direct_any(n_, c, in, in_stride, out, out_stride, m);
    }
  }
  const int64_t h = n_ / 2;
  float* sums = scratch;
  float* differences = scratch + h * m;
  float* transformed = scratch + n_ * m;  // h rows; the rest is the half plan's
  float* rest = scratch + 2 * n_ * m;
  for (int64_t j = 0; j < h; ++j) {
    sum_and_scaled_difference(in + j * in_stride, in + (n_ - 1 - j) * in_stride, sums + j * m, differences + j * m,
                              inverse_cos_[j], m);
  }
  // Even outputs straight into out's even rows; odd ones from W.
  half_->apply(sums, m, out, 2 * out_stride, m, rest);
  half_->apply(differences, m, transformed, m, m, rest);
  for (int64_t k = 0; k + 1 < h; ++k)
    add(transformed + k * m, transformed + (k + 1) * m, out + (2 * k + 1) * out_stride, m);
  copy(transformed + (h - 1) * m, out + (n_ - 1) * out_stride, m);
}

}  // namespace exogym::modules::demo::detail
