// With the tour, under the host compiler's -Wall -Wextra -Wformat=2 -Werror: a user's own kernel
// launched through cohort::launch, whose failure builds a cuda_error with context (gcc 12's
// -Wrestrict flagged `" " + std::string(context)` there, at -O3).
#include <cohort/cohort.cuh>

#include <cstddef>

namespace {
__global__ void scale_kernel(float* x, std::size_t n) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}
} // namespace

void scale(cohort::stream_ref s, float* x, std::size_t n) {
  const auto blocks = static_cast<unsigned>((n + 255) / 256);
  cohort::launch(s, {.grid = blocks, .block = 256}, scale_kernel, x, n);
}
