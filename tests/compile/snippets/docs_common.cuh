// What every page's blocks may use: the kernels the pages launch (docs_<page>.cuh include this).
#pragma once
#include <cohort/cohort.cuh>

#include <cstdint>
#include <vector>

__global__ void scale(cuda::std::span<float> x, float a) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < x.size();
       i += gridDim.x * blockDim.x)
    x[i] *= a;
}
__global__ void touch(float* p) {
  if (p != nullptr)
    *p = 0;
}
