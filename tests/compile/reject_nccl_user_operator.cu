// Must not compile: NCCL has no user-defined operators.
#include <cohort/cohort.cuh>

struct absolute_max {
  __device__ float operator()(float a, float b) const { return fmaxf(fabsf(a), fabsf(b)); }
};

void reduce(cohort::communicator_ref comm, cuda::std::span<float> data, cohort::stream_ref s) {
  cohort::all_reduce(comm, s, data, absolute_max{});
}

int main() {}
