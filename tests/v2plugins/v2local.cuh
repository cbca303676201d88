// Helpers of the v2 test kernels (beside their source): plain constexpr functions, which compile
// as device functions only because gemmlab passes -default-device.
#pragma once
constexpr long long at_a(int col_major, int m, int k, int lda) {
  return col_major ? (long long)m + (long long)k * lda : (long long)m * lda + k;
}
constexpr long long at_b(int col_major, int k, int n, int ldb) {
  return col_major ? (long long)k + (long long)n * ldb : (long long)k * ldb + n;
}
