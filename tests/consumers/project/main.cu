// A consumer's program: an extended device lambda in the user's own kernel over a
// distributed_buffer, which needs what cohort::cohort brings (C++20, --extended-lambda, CCCL).
#include <cohort/cohort.cuh>

#include <cstdio>
#include <vector>

template <class F>
__global__ void apply(cuda::std::span<float> data, F f) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < data.size();
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] = f(data[i]);
}

int main() {
  if (cohort::device_count() == 0) {
    std::puts("no GPU visible; built and linked against cohort");
    std::puts("consumer ok");
    return 0;
  }
  auto group = cohort::device_group::emulated(cohort::device_ref{0}, 2);
  std::vector<float> host(1001, 1.5f);
  cohort::distributed_buffer<float> x(group, host.size());
  x.copy_from_host(host);
  for (std::size_t i = 0; i < x.shards(); ++i) {
    auto s = x.shard(i);
    cohort::scoped_device on(s.device);
    apply<<<8, 128, 0, s.stream.native_handle()>>>(s.data, [] __device__(float v) { return 2 * v; });
    cohort::check_launch("apply", s.device.get());
  }
  x.copy_to_host(host);
  group.synchronize();
  for (float v : host)
    if (v != 3.0f) {
      std::puts("consumer computed a wrong value");
      return 1;
    }
  std::puts("consumer ok");
  return 0;
}
