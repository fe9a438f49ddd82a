// managed_bench — one managed allocation over the group against device buffers, in one run:
//   1. multi_device_for_each (v = a·v + b) and multi_device_reduce (sum of floats into a
//      device_result) over a managed_buffer, its shards prefetched to their devices, against a
//      distributed_buffer of the same split; on a group of one GPU and on every GPU (an emulated
//      pair where one is visible). The ratio device/managed should be 1: prefetched managed memory
//      is device memory.
//   2. a kernel on member 0 that reads member 1's shard: through the managed mapping (one pointer,
//      accessed-by advice) against peer access to member 1's device buffer. On an emulated pair
//      both shards live on the one GPU, and the figures say nothing about a link.
// Prints Markdown tables. Usage: managed_bench [elements per GPU, default 2^28]
#include "timing.cuh"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct scale_shift {
  __device__ void operator()(float& v) const { v = 0.9999f * v + 0.0001f; }
};

// Sums n floats from `from` into one per block (`out`): a read that streams a shard once.
__global__ void read_all(const float* from, std::size_t n, float* out) {
  float sum = 0.0f;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    sum += from[i];
  if (sum == -1.0f) out[blockIdx.x] = sum; // keeps the loads; never true for these values
}

std::size_t elements_per_gpu(int argc, char** argv) {
  if (argc < 2) return std::size_t{1} << 28;
  return static_cast<std::size_t>(std::strtoull(argv[1], nullptr, 10));
}

// The free bytes of the group's tightest device, over its members on that device.
std::size_t free_per_member(const cohort::device_group& group) {
  std::size_t least = ~std::size_t{0};
  for (std::size_t i = 0; i < group.size(); ++i) {
    cohort::scoped_device on(group.device(i));
    std::size_t free = 0, total = 0;
    cohort::check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    std::size_t sharing = 0;
    for (std::size_t j = 0; j < group.size(); ++j)
      sharing += group.device(j) == group.device(i);
    least = std::min(least, free / sharing);
  }
  return least;
}

void compare_algorithms(const char* label, cohort::device_group& group, std::size_t per_gpu) {
  // Each member holds a device shard and a managed one: both must fit, with room for scratch.
  const std::size_t fits = free_per_member(group) / (3 * sizeof(float));
  const std::size_t n = std::min(per_gpu, fits) * group.size();
  cohort::distributed_buffer<float> device(group, n);
  cohort::managed_buffer<float> managed(group, n);
  device.fill_bytes(0);
  cohort::multi_device_for_each(group, managed, [] __device__(float& v) { v = 0.0f; });
  managed.prefetch();
  cohort::device_result<float> total(group);
  const cohort::stream_ref origin = group.stream(0);
  const auto timed = [&](auto&& work) {
    return bench::time_ms(origin, [&] {
      group.fork(origin);
      work();
      group.join(origin);
    });
  };
  const auto row = [&](const char* call, double device_ms, double managed_ms) {
    std::printf("| %s | %s | %zu | %.1f | %.1f | %.3f |\n", call, label, n / group.size(),
                device_ms * 1e3, managed_ms * 1e3, device_ms / managed_ms);
  };
  row("multi_device_for_each",
      timed([&] { cohort::multi_device_for_each(group, device, scale_shift{}); }),
      timed([&] { cohort::multi_device_for_each(group, managed, scale_shift{}); }));
  row("multi_device_reduce (device_result)", timed([&] {
        cohort::multi_device_reduce(group, std::as_const(device), 0.0f, cuda::std::plus<>{}, total);
      }),
      timed([&] {
        cohort::multi_device_reduce(group, std::as_const(managed), 0.0f, cuda::std::plus<>{},
                                    total);
      }));
}

void compare_remote_reads(cohort::device_group& group, std::size_t per_gpu) {
  const std::size_t fits = free_per_member(group) / (3 * sizeof(float));
  const std::size_t n = std::min(per_gpu, fits);
  cohort::distributed_buffer<float> device(group, n * 2);
  cohort::managed_buffer<float> managed(group, n * 2);
  device.fill_bytes(0);
  cohort::multi_device_for_each(group, managed, [] __device__(float& v) { v = 0.0f; });
  managed.prefetch();
  const bool peers = group.enable_peer_access();
  cohort::device_buffer<float> sink(1024, group.stream(0));
  const cohort::stream_ref s = group.stream(0);
  const float* over_peer = device.shard(1).data.data();
  const float* over_mapping = managed.span().data() + managed.shard(1).offset;
  const std::size_t count = managed.shard(1).data.size();
  const auto read = [&](const float* from) {
    return bench::time_ms(s, [&] {
      cohort::launch(s, {.grid = 1024, .block = 256}, read_all, from, count, sink.data());
    });
  };
  const double peer_ms = read(over_peer), managed_ms = read(over_mapping);
  const double bytes = static_cast<double>(count) * sizeof(float);
  std::printf("| %zu | %s | %.1f | %.1f | %.1f | %.1f | %.3f |\n", count,
              group.is_emulated() ? "one GPU (emulated pair)" : (peers ? "peer path" : "none"),
              peer_ms * 1e3, bytes / (peer_ms * 1e-3) / 1e9, managed_ms * 1e3,
              bytes / (managed_ms * 1e-3) / 1e9, peer_ms / managed_ms);
}

} // namespace

int main(int argc, char** argv) {
  if (cohort::device_count() == 0) {
    std::puts("# no GPU visible: nothing measured");
    return 0;
  }
  const std::size_t per_gpu = elements_per_gpu(argc, argv);
  cohort::device_group one(std::vector<cohort::device_ref>{cohort::device_ref{0}});
  auto every = cohort::device_group::every_gpu_or_emulated(2);
  std::printf("## managed_buffer (prefetched) against distributed_buffer, float, median of 20\n\n");
  std::printf("| call | group | elements per GPU | device us | managed us | device/managed |\n");
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  compare_algorithms("one GPU", one, per_gpu);
  compare_algorithms(every.is_emulated() ? "emulated pair" : "every GPU", every, per_gpu);
  std::printf("\n## member 0 reads member 1's shard: peer access against the managed mapping\n\n");
  std::printf("| elements | path | peer us | peer GB/s | managed us | managed GB/s | peer/managed "
              "|\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  compare_remote_reads(every, per_gpu);
  return 0;
}
