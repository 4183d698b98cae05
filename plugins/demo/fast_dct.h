#pragma once
// A fast DCT-II for DeMo's encoder (dct.h): the transform along axis 0 of a
// row-major block of n rows, each row a vector of m floats, done on strips
// of 16 columns (the last one padded) so that every operation is a vector
// operation. Even lengths split into two half-length DCTs (Lee's
// algorithm: sums and scaled differences of mirrored rows), recursively;
// once a length is 16 or less
// the rest of the recursion is unrolled at compile time with the strip's
// values in registers; odd lengths and the smallest ones are done directly.
// For n = 64 that is about 12 flops per element instead of the 128 of a
// matrix product with the DCT basis.
//
// Part of the demo plugin (not installed). Results are
// deterministic: the same input gives the same bits on every call and
// thread; they equal the matrix product with dct_basis() up to float
// rounding (relative error below 1e-5 for chunks up to 64).
#include <cstdint>
#include <memory>
#include <vector>

namespace exogym::modules::demo::detail {

struct StripKernel;

class DctPlan {
 public:
  explicit DctPlan(int64_t n);
  ~DctPlan();
  DctPlan(const DctPlan&) = delete;
  DctPlan& operator=(const DctPlan&) = delete;

  // out row k (at out + k * out_stride) = sum_j C[k][j] * row j of `in` (at
  // in + j * in_stride), for m floats per row, where
  // C[k][j] = cos(pi (2j + 1) k / 2n): the unnormalised DCT-II.
  // `scratch` holds scratch_floats() floats; `in` and `out` must not overlap.
  void apply(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t m, float* scratch) const;

  int64_t scratch_floats() const;

  // Columns per strip (see apply()).
  static constexpr int64_t kStrip = 16;

  // The factor that makes row k orthonormal: sqrt(1/n) for k = 0, else
  // sqrt(2/n).
  float orthonormal_scale(int64_t k) const { return k == 0 ? scale0_ : scale_; }

 private:
  friend struct StripKernel;
  // apply() on kStrip columns, with strip_scratch_floats() of scratch.
  void transform_strip(const float* in, int64_t in_stride, float* out, int64_t out_stride, float* scratch) const;
  int64_t strip_scratch_floats() const;

  int64_t n_;
  float scale0_, scale_;
  // Direct lengths: C (n x n). Split lengths: 1 / (2 cos(pi (2j+1) / 2n))
  // for j < n/2, and the plan of length n/2.
  std::vector<float> basis_;
  std::vector<float> inverse_cos_;
  std::unique_ptr<DctPlan> half_;
};

// out[c * out_stride + r] = in[r * in_stride + c] for r < rows, c < columns
// (in and out must not overlap): blocks of kStrip x kStrip in registers.
void transpose(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t rows, int64_t columns);

}  // namespace exogym::modules::demo::detail
