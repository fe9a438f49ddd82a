// A PyTorch C++/CUDA extension on cohort: torch tensors used in place through distributed views,
// on torch's current stream of each GPU (the legacy default stream unless the caller entered
// `torch.cuda.stream(...)`), with cohort's scratch from PyTorch's caching allocator.
//
// Built by run.py with torch.utils.cpp_extension.load under PyTorch's own nvcc flags.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/extension.h>

#include <cohort/cohort.cuh>

#include <cstddef>
#include <vector>

namespace {

// PyTorch's caching allocator as a cohort memory resource: memory comes from torch's pools, is
// counted by torch.cuda.memory_allocated(), and is reused by torch once cohort gives it back.
struct torch_caching_resource {
  void* allocate_async(std::size_t bytes, std::size_t, cuda::stream_ref stream) {
    return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(bytes, stream.get());
  }
  void deallocate_async(void* p, std::size_t, std::size_t, cuda::stream_ref) {
    c10::cuda::CUDACachingAllocator::raw_delete(p);
  }
};

torch_caching_resource& torch_memory() {
  static torch_caching_resource resource;
  return resource;
}

// One member per tensor, each on its own GPU, on torch's current stream there.
cohort::device_group group_over(const std::vector<torch::Tensor>& tensors) {
  TORCH_CHECK(!tensors.empty(), "cohort_torch: give one tensor per GPU");
  std::vector<cohort::stream_ref> streams;
  for (const torch::Tensor& t : tensors) {
    TORCH_CHECK(t.is_cuda() && t.is_contiguous() && t.scalar_type() == torch::kFloat32,
                "cohort_torch: tensors must be contiguous float32 CUDA tensors");
    const int device = t.device().index();
    streams.push_back(cohort::stream_ref::borrow(
        cohort::device_ref{device}, at::cuda::getCurrentCUDAStream(device).stream()));
  }
  cohort::device_group group(streams);
  group.set_memory_resource(torch_memory());
  return group;
}

cohort::distributed_view<float> view_of(const cohort::device_group& group,
                                        const std::vector<torch::Tensor>& tensors) {
  std::vector<cuda::std::span<float>> spans;
  for (const torch::Tensor& t : tensors)
    spans.emplace_back(t.data_ptr<float>(), static_cast<std::size_t>(t.numel()));
  return cohort::distributed_view<float>(group, spans);
}

// x = a * x + b on every element, in place, on each tensor's GPU.
void scale_add_(const std::vector<torch::Tensor>& tensors, double a, double b) {
  const cohort::device_group group = group_over(tensors);
  const auto x = view_of(group, tensors);
  const float fa = static_cast<float>(a), fb = static_cast<float>(b);
  cohort::multi_device_for_each(group, x, [=] __device__(float& v) { v = fa * v + fb; });
}

// The sum of every element of every tensor, accumulated in double, in order.
double sum(const std::vector<torch::Tensor>& tensors) {
  const cohort::device_group group = group_over(tensors);
  const auto x = view_of(group, tensors);
  return cohort::multi_device_transform_reduce(group, x, 0.0, cuda::std::plus<>{},
                                               [] __device__(float v) { return double(v); })
      .wait();
}

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale_add_", &scale_add_, "x = a * x + b in place, one tensor per GPU");
  m.def("sum", &sum, "the sum of every element, in double");
}
