// cohort/cohort.cuh — everything cohort offers, in one include.
//
// cohort runs CUDA work across several GPUs: devices, streams and events that know their device,
// buffers that remember where they live, device groups (real or emulated on one GPU), the
// partitioning that splits work over them, cohort's own peer-to-peer engine, NCCL, and the
// algorithms that run on them. The folders are the layers, lowest first (docs/design.md has the
// table a test holds the includes to); each header below also compiles on its own.
#pragma once

#include "errors/argument_error.cuh"
#include "errors/cuda_error.cuh"

#include "partitioning/adaptive_weights.cuh"
#include "partitioning/partition.cuh"

#include "devices/device_ref.cuh"
#include "devices/properties.cuh"
#include "devices/scoped_device.cuh"
#include "devices/topology.cuh"

#include "streams/event.cuh"
#include "streams/event_ref.cuh"
#include "streams/stream.cuh"
#include "streams/stream_ref.cuh"

#include "memory/bitwise_copyable.cuh"
#include "memory/device_buffer.cuh"
#include "memory/memory_resource.cuh"

#include "execution/adaptive_balancer.cuh"
#include "execution/capability.cuh"
#include "execution/chunk_pipeline.cuh"
#include "execution/device_group.cuh"
#include "execution/graph.cuh"
#include "execution/launch.cuh"
#include "execution/on_each.cuh"
#include "execution/scoped_scratch_resource.cuh"
#include "execution/sm_partition.cuh"

#include "distributed/distributed_buffer.cuh"
#include "distributed/distributed_view.cuh"
#include "distributed/indices.cuh"
#include "distributed/managed_buffer.cuh"
#include "distributed/shard.cuh"
#include "distributed/on_each_shard.cuh"

#include "communication/launch_environment.cuh"
#include "communication/operators.cuh"

// The peer-to-peer engine needs no NCCL.
#include "p2p/collectives.cuh"
#include "p2p/device.cuh"
#include "errors/p2p_error.cuh"
#include "p2p/p2p_clique.cuh"
#include "p2p/p2p_clique_options.cuh"
#include "p2p/p2p_handle.cuh"
#include "p2p/p2p_options.cuh"
#include "p2p/p2p_progress.cuh"
#include "p2p/p2p_session.cuh"

#if COHORT_WITH_NCCL
#include "errors/nccl_error.cuh"

#include "nccl/bootstrap.cuh"
#include "nccl/collectives.cuh"
#include "nccl/communicator.cuh"
#include "nccl/nccl_clique.cuh"
#include "nccl/traits.cuh"
#include "nccl/unique_id.cuh"
#endif

#include "algorithms/for_each.cuh"
#include "algorithms/pending.cuh"
#include "algorithms/reduce.cuh"
#include "algorithms/scan.cuh"
#include "algorithms/sort.cuh"

#include "training/gradient_buckets.cuh"
#include "training/loss_scaler.cuh"
#include "training/sharded_parameters.cuh"

#include "version.cuh"
