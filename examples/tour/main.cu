// tour — cohort in one page: the GPUs and their peer matrix, a distributed buffer over all of
// them, a kernel on every shard, and a round trip checked against the host.
//
//   cmake --workflow --preset tour
#include <cohort/cohort.cuh>

#include <cstdio>
#include <vector>

// A user's own kernel: it gets a shard as a span and sees global indices through the offset.
__global__ void add_global_index(cuda::std::span<double> shard, std::size_t offset) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < shard.size();
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    shard[i] += static_cast<double>(offset + i);
}

int main() {
  const std::vector<cohort::device_ref> gpus = cohort::devices();
  if (gpus.empty()) {
    std::puts("No GPU is visible (no driver, no device, or CUDA_VISIBLE_DEVICES is empty).");
    std::puts("cohort is built and linked; run this on a machine with a GPU to see the rest.");
    std::puts("tour ok (nothing to run)");
    return 0;
  }

  std::printf("%zu GPU(s):\n", gpus.size());
  for (cohort::device_ref d : gpus) {
    const cohort::device_properties p = cohort::properties(d);
    const cohort::free_and_total memory = cohort::memory_info(d);
    std::printf("  GPU %d  %s  sm_%d%d  %d SMs  %.1f of %.1f GiB free  bus %s\n", d.get(),
                p.name.c_str(), p.major, p.minor, p.multiprocessors, memory.free / 1073741824.0,
                memory.total / 1073741824.0, p.pci_bus_id.c_str());
  }

  const cohort::topology topo = cohort::topology::of(gpus);
  std::puts("peer matrix (row reads column's memory; rank: lower is faster):");
  for (std::size_t from = 0; from < topo.size(); ++from) {
    std::printf("  GPU %zu:", from);
    for (std::size_t to = 0; to < topo.size(); ++to) {
      const cohort::peer_link& link = topo.link(from, to);
      if (link.kind == cohort::link_kind::peer)
        std::printf("  peer(rank %d%s)", link.performance_rank,
                    link.native_atomics ? ", atomics" : "");
      else
        std::printf("  %s", cohort::to_string(link.kind));
    }
    std::puts("");
  }

  // Every GPU; on one GPU, two logical devices emulated on it, so the tour still shows a split
  // buffer.
  cohort::device_group group = cohort::device_group::every_gpu_or_emulated(2);
  std::printf("group of %zu member(s)%s\n", group.size(),
              group.is_emulated() ? ", emulated on GPU 0" : "");

  const std::size_t n = 10'000'019; // a prime: shards of unequal size
  cohort::distributed_buffer<double> x(group, n);
  for (std::size_t i = 0; i < x.shards(); ++i) {
    const auto s = x.shard(i);
    std::printf("  shard %zu on GPU %d: elements [%zu, %zu)\n", i, s.device.get(), s.offset,
                s.offset + s.data.size());
  }

  std::vector<double> host(n, 0.5);
  x.copy_from_host(host);
  for (std::size_t i = 0; i < x.shards(); ++i) {
    const auto s = x.shard(i);
    cohort::launch(s.stream, {.grid = 264, .block = 256}, add_global_index, s.data, s.offset);
  }
  x.copy_to_host(host);
  group.synchronize();

  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += host[i] != 0.5 + static_cast<double>(i);
  std::printf("round trip of %zu doubles through %zu shard(s): %zu wrong\n", n, x.shards(), wrong);
  if (wrong != 0) return 1;
  std::puts("tour ok");
  return 0;
}
