// cohort/memory/memory_resource.cuh — where cohort's device memory comes from.
//
// Every allocation cohort makes goes through a memory resource: by default the device's
// stream-ordered pool (cudaMallocAsync), or one the caller gives: an rmm resource, PyTorch's
// caching allocator behind a small adaptor, a pool of the caller's own. A resource is anything
// with the two members of CCCL's `cuda::mr` async resource concept, so rmm's resources plug in
// unchanged:
//
//   void* allocate_async(std::size_t bytes, std::size_t alignment, cuda::stream_ref stream);
//   void deallocate_async(void* p, std::size_t bytes, std::size_t alignment, cuda::stream_ref stream);
//
// `memory_resource_ref` refers to one without owning it (the resource must outlive every
// allocation made through it); memory comes back on the stream it was allocated on, after the
// work enqueued there. A resource that returns null or throws std::bad_alloc is reported as out of
// memory.
//
//   struct counting_pool { // a resource of the caller's
//     void* allocate_async(std::size_t bytes, std::size_t, cuda::stream_ref s) {
//       void* p = nullptr;
//       cudaMallocAsync(&p, bytes, s.get());
//       return p;
//     }
//     void deallocate_async(void* p, std::size_t, std::size_t, cuda::stream_ref s) {
//       cudaFreeAsync(p, s.get());
//     }
//   };
//
//   counting_pool pool;
//   cohort::device_buffer<float> x(1000, stream, pool);     // allocated through `pool`
//   cohort::set_release_threshold(cohort::device_ref{0}, std::size_t(1) << 30);
#pragma once

#include "../devices/device_ref.cuh"
#include "../devices/scoped_device.cuh"
#include "../errors/cuda_error.cuh"
#include "../streams/stream_ref.cuh"

#include <cuda/stream_ref>

#include <concepts>
#include <cstddef>
#include <new>
#include <string>

namespace cohort {

// What a memory resource answers: CCCL's async resource concept, members only.
template <class R>
concept async_memory_resource = requires(R& r, void* p, std::size_t bytes, std::size_t alignment,
                                         cuda::stream_ref stream) {
  { r.allocate_async(bytes, alignment, stream) } -> std::same_as<void*>;
  r.deallocate_async(p, bytes, alignment, stream);
};

// The device's current memory pool, stream-ordered (cudaMallocAsync on the stream's device).
class device_pool_resource {
 public:
  void* allocate_async(std::size_t bytes, std::size_t, cuda::stream_ref stream) {
    void* p = nullptr;
    const cudaError_t status = cudaMallocAsync(&p, bytes, stream.get());
    if (status == cudaErrorMemoryAllocation) {
      ignore_cuda_error(status); // reported by the caller
    } else if (status != cudaSuccess) [[unlikely]] {
      int device = no_device; // the stream's, current during the call (memory_resource_ref)
      ignore_cuda_error(cudaGetDevice(&device));
      check_cuda(status, "cudaMallocAsync", device);
    }
    return p;
  }
  void deallocate_async(void* p, std::size_t, std::size_t, cuda::stream_ref stream) noexcept {
    ignore_cuda_error(cudaFreeAsync(p, stream.get()));
  }
  friend bool operator==(const device_pool_resource&, const device_pool_resource&) noexcept {
    return true;
  }
};

// A non-owning reference to any async_memory_resource, itself a value.
class memory_resource_ref {
 public:
  template <async_memory_resource R>
  requires(!std::same_as<R, memory_resource_ref>) memory_resource_ref(R& resource)
  noexcept // NOLINT: converts, as cuda::mr::resource_ref does
      : object_(&resource)
      , allocate_([](void* r, std::size_t bytes, std::size_t alignment, cuda::stream_ref s) {
        return static_cast<R*>(r)->allocate_async(bytes, alignment, s);
      })
      , deallocate_(
            [](void* r, void* p, std::size_t bytes, std::size_t alignment, cuda::stream_ref s) {
              static_cast<R*>(r)->deallocate_async(p, bytes, alignment, s);
            }) {}

  // `bytes` on `stream`'s device, in its order: null where the resource has none to give (a
  // std::bad_alloc, as rmm's out_of_memory is, counts as none; anything else it throws
  // propagates). The stream's device is current during the call.
  void* allocate(std::size_t bytes, std::size_t alignment, stream_ref stream) const {
    scoped_device on(stream.device());
    try {
      return allocate_(object_, bytes, alignment, cuda::stream_ref(stream.native_handle()));
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
  }
  // Gives `p` back on `stream`, after the work enqueued there. Never throws.
  void deallocate(void* p, std::size_t bytes, std::size_t alignment,
                  stream_ref stream) const noexcept {
    try {
      scoped_device on(stream.device());
      deallocate_(object_, p, bytes, alignment, cuda::stream_ref(stream.native_handle()));
    } catch (...) { // a destructor's path: the device is gone, or the resource failed
    }
  }

  // The same resource object.
  friend bool operator==(const memory_resource_ref& a, const memory_resource_ref& b) noexcept {
    return a.object_ == b.object_;
  }

 private:
  void* object_;
  void* (*allocate_)(void*, std::size_t, std::size_t, cuda::stream_ref);
  void (*deallocate_)(void*, void*, std::size_t, std::size_t, cuda::stream_ref);
};

// Device memory cohort holds through a group's member: bytes now, and the most at once.
struct memory_usage {
  std::size_t bytes = 0;
  std::size_t peak = 0;
};

// The resource cohort allocates from where none is given: the device's stream-ordered pool.
inline memory_resource_ref default_memory_resource() noexcept {
  static device_pool_resource pool;
  return pool;
}

// The bytes `device`'s default pool keeps for reuse when its streams synchronize (by default 0:
// the pool gives its free memory back to the driver at every synchronization, and the next
// allocation pays for it again). UINT64_MAX keeps everything.
inline void set_release_threshold(device_ref device, std::size_t bytes) {
  detail::require_valid_device(device, "set_release_threshold", "device");
  scoped_device on(device);
  cudaMemPool_t pool = nullptr;
  check_cuda(cudaDeviceGetDefaultMemPool(&pool, device.get()), "cudaDeviceGetDefaultMemPool",
             device.get());
  cuuint64_t threshold = bytes;
  check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
             "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)", device.get());
}

} // namespace cohort
