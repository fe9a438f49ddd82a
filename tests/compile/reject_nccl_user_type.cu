// Must not compile: NCCL cannot reduce a user-defined type.
#include <cohort/cohort.cuh>

struct pair {
  float a, b;
};

void reduce_pairs(cohort::communicator_ref comm, cuda::std::span<pair> data, cohort::stream_ref s) {
  cohort::all_reduce(comm, s, data, cohort::sum);
}

int main() {}
