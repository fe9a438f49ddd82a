// cohort/cohort.cuh — everything cohort offers, in one include.
//
// cohort runs CUDA work across several GPUs: devices, streams and events that know their device,
// buffers that remember where they live, device groups (real or emulated on one GPU), the
// partitioning that splits work over them, and the algorithms that run on them (for_each,
// reductions). Each header below also compiles on its own.
#pragma once

#include "errors/argument_error.cuh"
#include "errors/cuda_error.cuh"

#include "devices/device_ref.cuh"
#include "devices/properties.cuh"
#include "devices/scoped_device.cuh"
#include "devices/topology.cuh"

#include "streams/event.cuh"
#include "streams/event_ref.cuh"
#include "streams/stream.cuh"
#include "streams/stream_ref.cuh"

#include "execution/adaptive_balancer.cuh"
#include "execution/capability.cuh"
#include "execution/device_group.cuh"
#include "execution/on_each.cuh"
#include "execution/sm_partition.cuh"

#include "partitioning/adaptive_weights.cuh"
#include "partitioning/partition.cuh"

#include "memory/device_buffer.cuh"
#include "memory/distributed_buffer.cuh"
#include "memory/pinned_slots.cuh"

#include "algorithms/for_each.cuh"
#include "algorithms/pending.cuh"
#include "algorithms/reduce.cuh"

#include "version.cuh"

// The peer-to-peer engine needs no NCCL.
#include "communication/arguments.cuh"
#include "communication/launch_environment.cuh"
#include "communication/operators.cuh"
#include "communication/p2p_clique.cuh"
#include "communication/p2p_collectives.cuh"
#include "communication/p2p_kernels.cuh"

#if COHORT_WITH_NCCL
#include "errors/nccl_error.cuh"

#include "communication/bootstrap.cuh"
#include "communication/clique.cuh"
#include "communication/collectives.cuh"
#include "communication/communicator.cuh"
#include "communication/nccl_traits.cuh"
#include "communication/unique_id.cuh"
#endif
