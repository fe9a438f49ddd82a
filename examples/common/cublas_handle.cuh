// cublas_handle.cuh — the cuBLAS handle the examples share: made and destroyed on one member's
// device, with a workspace of its own.
//
// cublasSetStream puts a handle back on cuBLAS's default workspace, which cuBLAS may allocate
// and free during a call; an allocation can wait for the GPU, and there a collective may be
// waiting for this very GEMM (tensor_parallel_gemm's overlapped blocks, data_parallel_training's
// buckets). So `on(stream)` sets the stream and then this handle's own workspace, every time.
#pragma once

#include <cohort/cohort.cuh>

#include <cublas_v2.h>

#include <cstddef>
#include <stdexcept>
#include <string>

inline void check_cublas(cublasStatus_t status, const char* call, int device) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed on device " + std::to_string(device) +
                             " (cuBLAS status " + std::to_string(static_cast<int>(status)) + ")");
}

class cublas_handle {
 public:
  // On `stream`'s device; the workspace is allocated on `stream`.
  explicit cublas_handle(cohort::stream_ref stream)
      : device_(stream.device())
      , workspace_(workspace_bytes, stream) {
    cohort::scoped_device on(device_);
    check_cublas(cublasCreate(&handle_), "cublasCreate", device_.get());
  }
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
  ~cublas_handle() {
    cohort::scoped_device on(device_);
    (void)cublasDestroy(handle_);
  }

  // The handle, its calls enqueued on `stream` with this handle's workspace. The caller keeps
  // the handle's device current for the calls (cohort::scoped_device on(device())).
  cublasHandle_t on(cohort::stream_ref stream) {
    check_cublas(cublasSetStream(handle_, stream.native_handle()), "cublasSetStream",
                 device_.get());
    check_cublas(cublasSetWorkspace(handle_, workspace_.data(), workspace_bytes),
                 "cublasSetWorkspace", device_.get());
    return handle_;
  }
  cohort::device_ref device() const noexcept { return device_; }

 private:
  // What cuBLAS's guide advises for Hopper.
  static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

  cohort::device_ref device_;
  cohort::device_buffer<unsigned char> workspace_;
  cublasHandle_t handle_ = nullptr;
};
