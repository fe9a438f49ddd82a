// cohort/nccl/collectives.cuh — NCCL collectives over device spans, with arguments checked
// before anything is enqueued and types and operators checked when the call compiles.
//
//   cohort::all_reduce(comm, stream, data, cohort::sum);              // in place
//   cohort::all_reduce(comm, stream, send, recv, cohort::avg);        // out of place
//   cohort::broadcast(comm, stream, data, /*root*/ 0);
//   cohort::all_gather(comm, stream, mine, everyone);                 // everyone: size() * mine
//   cohort::reduce_scatter(comm, stream, everyone, mine, cohort::max);
//   cohort::send(comm, stream, data, /*peer*/ 1);  cohort::recv(comm, stream, data, /*peer*/ 0);
//   {                                                                 // one NCCL group
//     cohort::nccl_group batch;
//     cohort::send(comm, stream, a, /*peer*/ 1);
//     cohort::recv(comm, stream, b, /*peer*/ 1);
//   }
//
// The stream comes right after the communicator, as in every call on a communicator, clique or
// group that also needs a stream.
//
// Data movement (broadcast, all_gather, send, recv) takes any bitwise copyable type
// (memory/bitwise_copyable.cuh: trivially copyable ones, __half2, __nv_bfloat162; its bytes travel
// as uint8); reductions take NCCL's own types only. Spans are libcu++'s cuda::std::span
// (a device_buffer's span() or a shard's data), memory of the communicator's device, as is the
// stream. A blocking communicator's calls (nccl_calls::blocking, the default) can be captured into
// a CUDA graph; a bounded one's refuse a stream being captured (std::logic_error), and an aborted
// communicator's are refused (std::invalid_argument), before anything is enqueued.
#pragma once

#include "../detail/arguments.cuh"
#include "../detail/nvtx.cuh"
#include "../memory/bitwise_copyable.cuh"
#include "communicator.cuh"
#include "traits.cuh"

#include <cuda/std/span>

#include <concepts>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <vector>

namespace cohort {

// Batches the NCCL calls made while it lives into one NCCL group (ncclGroupStart/End), as NCCL
// needs for several ranks driven from one thread, or to fuse calls. `end()` reports errors; the
// destructor ends a group left open and swallows what it reports.
//
// For communicators whose calls are bounded (non-blocking, so that nothing can hang): when NCCL
// answers a group with ncclInProgress, `end()` waits, bounded by each communicator's time-out,
// until NCCL has taken every operation of the group, as NCCL requires before a communicator is
// used again.
//
// A group left open by an exception has posted its calls without the calls that were to follow:
// the communicators it used are marked so that their destruction aborts them at once rather than
// waiting their time-out for partners that never come.
class nccl_group {
 public:
  nccl_group()
      : outer_(current())
      , exceptions_(std::uncaught_exceptions()) {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    current() = this;
  }
  nccl_group(const nccl_group&) = delete;
  nccl_group& operator=(const nccl_group&) = delete;
  ~nccl_group() {
    if (!open_) return;
    if (std::uncaught_exceptions() > exceptions_)
      for (const communicator_ref& c : used_)
        detail::strand(c);
    try {
      end();
    } catch (...) { // destructors never throw; call end() to see the error
    }
  }

  void end() {
    if (!open_) return;
    open_ = false;
    current() = outer_;
    const ncclResult_t result =
        used_.empty() ? ncclGroupEnd() : detail::group_end_on(used_.front().device());
    if (result != ncclSuccess && result != ncclInProgress) check_nccl(result, "ncclGroupEnd");
    if (outer_ != nullptr) { // nested: the outermost group waits for everything
      for (const communicator_ref& c : used_)
        outer_->used_.push_back(c);
      return;
    }
    // NCCL answers ncclSuccess once every operation of the group is posted (always so for blocking
    // communicators): polling each communicator then would only add its cost to every call.
    if (result != ncclInProgress) return;
    for (const communicator_ref& c : used_)
      detail::wait_until_taken(c, "ncclGroupEnd");
  }

  // Called by cohort's collectives: `comm` takes part in the group open on this thread, if any.
  static bool note(communicator_ref comm) {
    if (current() == nullptr) return false;
    current()->used_.push_back(comm);
    return true;
  }

 private:
  static nccl_group*& current() {
    thread_local nccl_group* open = nullptr;
    return open;
  }

  nccl_group* outer_;
  int exceptions_;
  bool open_ = true;
  std::vector<communicator_ref> used_;
};

namespace detail {

// What every call checks of its communicator and stream before it enqueues anything: the stream
// is on the communicator's device, the communicator was not aborted, and a stream being captured
// is refused for a communicator whose calls are bounded (NCCL hands them to a helper thread, which
// the capture cannot follow); for a blocking one, the graph is counted (see
// communicator_state::captured_on).
inline void require_call(communicator_ref comm, stream_ref stream, std::string_view function) {
  require_stream(stream, function);
  if (stream.device() != comm.device())
    throw_invalid_argument(function, "stream",
                           "is on device " + std::to_string(stream.device().get()) +
                               " but the communicator's rank is on device " +
                               std::to_string(comm.device().get()) + ".");
  if (ended(comm))
    throw_invalid_argument(function, "comm",
                           "was aborted (a time-out or an error) or moved from; make a new one.");
  communicator_state* state = state_access::of(comm);
  if (state == nullptr || !capturing(stream)) return;
  if (state->bounded_calls())
    throw_capture_refused(stream, function,
                          "a communicator whose calls are bounded (nccl_calls::bounded) cannot "
                          "be captured: NCCL hands its calls to a helper thread. Capture the "
                          "calls of a communicator made with nccl_calls::blocking (the default).");
  state->captured_on(stream);
}

// `data` is memory of the communicator's device (not null, not host memory, not another GPU's).
template <class T>
void require_on_device(communicator_ref comm, stream_ref stream, cuda::std::span<T> data,
                       std::string_view function, std::string_view argument) {
  require_memory_of(comm.device(), data.data(), data.size_bytes(), function, argument, stream);
}

inline void require_rank(communicator_ref comm, int rank, std::string_view function,
                         std::string_view argument) {
  if (rank < 0 || rank >= comm.size())
    throw_invalid_argument(function, argument,
                           "rank " + std::to_string(rank) + " is not in [0, " +
                               std::to_string(comm.size()) + ").");
}

// NCCL's type and count for T's elements: NCCL's own type, else T's bytes as uint8.
template <class T>
struct wire {
  static constexpr ncclDataType_t type = ncclUint8;
  static constexpr std::size_t per_element = sizeof(T);
};
template <class T>
requires nccl_element<T>
struct wire<T> {
  static constexpr ncclDataType_t type = nccl_type_v<T>;
  static constexpr std::size_t per_element = 1;
};

template <class T>
constexpr void require_movable() {
  static_assert(bitwise_copyable_v<T>,
                "NCCL moves bytes: the element type must be bitwise copyable (trivially copyable, "
                "or cohort::bitwise_copyable specialized for it).");
}

// The operator NCCL is handed. Over one rank an average is the sum, and NCCL copies a sum, while
// its one-rank kernel for an average (a pre-multiplied sum) leaves the last elements of some
// counts unwritten: it splits the count over its blocks in 16-byte units rounded down (100,004
// floats over 25 blocks stop at 100,000).
inline ncclRedOp_t op_for(ncclRedOp_t op, communicator_ref comm) noexcept {
  return op == ncclAvg && comm.size() == 1 ? ncclSum : op;
}

// After a call on a non-blocking communicator: inside an nccl_group the group's end waits for it;
// alone, an ncclInProgress answer is waited out here (bounded by the communicator's time-out).
inline void check_call(ncclResult_t result, std::string_view call, communicator_ref comm) {
  if (result != ncclSuccess && result != ncclInProgress)
    check_nccl(result, call, comm.device().get(), comm.rank());
  if (!nccl_group::note(comm) && result == ncclInProgress) wait_until_taken(comm, call);
}

} // namespace detail

// recv[i] = op over ranks of send[i]. send and recv have the same size on every rank.
template <class S, class T, class Op>
requires std::same_as<std::remove_const_t<S>, T>
void all_reduce(communicator_ref comm, stream_ref stream, cuda::std::span<S> send,
                cuda::std::span<T> recv, [[maybe_unused]] Op op) {
  constexpr ncclRedOp_t nccl = detail::nccl_op<T, Op>();
  const detail::nvtx_range range("all_reduce", "nccl %zu B/rank, rank %d", recv.size_bytes(),
                                 comm.rank());
  detail::require_call(comm, stream, "all_reduce");
  detail::require_count(recv.size(), send.size(), "all_reduce", "recv", "the size of 'send'");
  detail::require_on_device(comm, stream, send, "all_reduce", "send");
  detail::require_on_device(comm, stream, recv, "all_reduce", "recv");
  detail::require_apart_or_same(send.data(), send.size_bytes(), recv.data(), recv.size_bytes(),
                                "all_reduce");
  scoped_device on(comm.device());
  detail::check_call(ncclAllReduce(send.data(), recv.data(), send.size(), nccl_type_v<T>,
                                   detail::op_for(nccl, comm), comm.native_handle(),
                                   stream.native_handle()),
                     "ncclAllReduce", comm);
}
template <class T, class Op>
void all_reduce(communicator_ref comm, stream_ref stream, cuda::std::span<T> data, Op op) {
  detail::require_writable<T>();
  all_reduce(comm, stream, cuda::std::span<const T>(data), data, op);
}

// recv = op over ranks of send, on `root` only (recv is ignored elsewhere but must fit).
template <class S, class T, class Op>
requires std::same_as<std::remove_const_t<S>, T>
void reduce(communicator_ref comm, stream_ref stream, cuda::std::span<S> send,
            cuda::std::span<T> recv, [[maybe_unused]] Op op, int root) {
  constexpr ncclRedOp_t nccl = detail::nccl_op<T, Op>();
  const detail::nvtx_range range("reduce", "nccl %zu B/rank to rank %d, rank %d", send.size_bytes(),
                                 root, comm.rank());
  detail::require_call(comm, stream, "reduce");
  detail::require_rank(comm, root, "reduce", "root");
  detail::require_count(recv.size(), send.size(), "reduce", "recv", "the size of 'send'");
  detail::require_on_device(comm, stream, send, "reduce", "send");
  if (comm.rank() == root) detail::require_on_device(comm, stream, recv, "reduce", "recv");
  detail::require_apart_or_same(send.data(), send.size_bytes(), recv.data(), recv.size_bytes(),
                                "reduce");
  scoped_device on(comm.device());
  detail::check_call(ncclReduce(send.data(), recv.data(), send.size(), nccl_type_v<T>,
                                detail::op_for(nccl, comm), root, comm.native_handle(),
                                stream.native_handle()),
                     "ncclReduce", comm);
}

// Every rank's recv = root's send.
template <class S, class T>
requires std::same_as<std::remove_const_t<S>, T>
void broadcast(communicator_ref comm, stream_ref stream, cuda::std::span<S> send,
               cuda::std::span<T> recv, int root) {
  detail::require_movable<T>();
  const detail::nvtx_range range("broadcast", "nccl %zu B from rank %d, rank %d", recv.size_bytes(),
                                 root, comm.rank());
  detail::require_call(comm, stream, "broadcast");
  detail::require_rank(comm, root, "broadcast", "root");
  detail::require_count(recv.size(), send.size(), "broadcast", "recv", "the size of 'send'");
  if (comm.rank() == root) detail::require_on_device(comm, stream, send, "broadcast", "send");
  detail::require_on_device(comm, stream, recv, "broadcast", "recv");
  detail::require_apart_or_same(send.data(), send.size_bytes(), recv.data(), recv.size_bytes(),
                                "broadcast");
  using w = detail::wire<T>;
  scoped_device on(comm.device());
  detail::check_call(ncclBroadcast(send.data(), recv.data(), send.size() * w::per_element, w::type,
                                   root, comm.native_handle(), stream.native_handle()),
                     "ncclBroadcast", comm);
}
template <class T>
void broadcast(communicator_ref comm, stream_ref stream, cuda::std::span<T> data, int root) {
  detail::require_writable<T>();
  broadcast(comm, stream, cuda::std::span<const T>(data), data, root);
}

// recv = every rank's send, in rank order: recv.size() == size() * send.size().
template <class S, class T>
requires std::same_as<std::remove_const_t<S>, T>
void all_gather(communicator_ref comm, stream_ref stream, cuda::std::span<S> send,
                cuda::std::span<T> recv) {
  detail::require_movable<T>();
  const detail::nvtx_range range("all_gather", "nccl %zu B/rank, rank %d", send.size_bytes(),
                                 comm.rank());
  detail::require_call(comm, stream, "all_gather");
  detail::require_count(recv.size(), send.size() * comm.size(), "all_gather", "recv",
                        "size() times the size of 'send'");
  detail::require_on_device(comm, stream, send, "all_gather", "send");
  detail::require_on_device(comm, stream, recv, "all_gather", "recv");
  // In place is send == recv + rank * count; any other overlap is an error.
  if (send.data() != recv.data() + send.size() * comm.rank())
    detail::require_apart_or_same(send.data(), send.size_bytes(), recv.data(), recv.size_bytes(),
                                  "all_gather");
  using w = detail::wire<T>;
  scoped_device on(comm.device());
  detail::check_call(ncclAllGather(send.data(), recv.data(), send.size() * w::per_element, w::type,
                                   comm.native_handle(), stream.native_handle()),
                     "ncclAllGather", comm);
}

// recv = op over ranks of this rank's block of send: send.size() == size() * recv.size().
template <class S, class T, class Op>
requires std::same_as<std::remove_const_t<S>, T>
void reduce_scatter(communicator_ref comm, stream_ref stream, cuda::std::span<S> send,
                    cuda::std::span<T> recv, [[maybe_unused]] Op op) {
  constexpr ncclRedOp_t nccl = detail::nccl_op<T, Op>();
  const detail::nvtx_range range("reduce_scatter", "nccl %zu B/rank, rank %d", recv.size_bytes(),
                                 comm.rank());
  detail::require_call(comm, stream, "reduce_scatter");
  detail::require_count(send.size(), recv.size() * comm.size(), "reduce_scatter", "send",
                        "size() times the size of 'recv'");
  detail::require_on_device(comm, stream, send, "reduce_scatter", "send");
  detail::require_on_device(comm, stream, recv, "reduce_scatter", "recv");
  if (recv.data() != send.data() + recv.size() * comm.rank())
    detail::require_apart_or_same(send.data(), send.size_bytes(), recv.data(), recv.size_bytes(),
                                  "reduce_scatter");
  scoped_device on(comm.device());
  detail::check_call(ncclReduceScatter(send.data(), recv.data(), recv.size(), nccl_type_v<T>,
                                       detail::op_for(nccl, comm), comm.native_handle(),
                                       stream.native_handle()),
                     "ncclReduceScatter", comm);
}

// Point to point: pair every send with the peer's recv of the same size (inside an nccl_group
// when one thread drives both ends, or to overlap several).
template <class S>
void send(communicator_ref comm, stream_ref stream, cuda::std::span<S> data, int peer) {
  using T = std::remove_const_t<S>;
  detail::require_movable<T>();
  const detail::nvtx_range range("send", "nccl %zu B to rank %d, rank %d", data.size_bytes(), peer,
                                 comm.rank());
  detail::require_call(comm, stream, "send");
  detail::require_rank(comm, peer, "send", "peer");
  detail::require_on_device(comm, stream, data, "send", "data");
  using w = detail::wire<T>;
  scoped_device on(comm.device());
  detail::check_call(ncclSend(data.data(), data.size() * w::per_element, w::type, peer,
                              comm.native_handle(), stream.native_handle()),
                     "ncclSend", comm);
}
template <class T>
void recv(communicator_ref comm, stream_ref stream, cuda::std::span<T> data, int peer) {
  detail::require_writable<T>();
  detail::require_movable<T>();
  const detail::nvtx_range range("recv", "nccl %zu B from rank %d, rank %d", data.size_bytes(),
                                 peer, comm.rank());
  detail::require_call(comm, stream, "recv");
  detail::require_rank(comm, peer, "recv", "peer");
  detail::require_on_device(comm, stream, data, "recv", "data");
  using w = detail::wire<T>;
  scoped_device on(comm.device());
  detail::check_call(ncclRecv(data.data(), data.size() * w::per_element, w::type, peer,
                              comm.native_handle(), stream.native_handle()),
                     "ncclRecv", comm);
}

} // namespace cohort
