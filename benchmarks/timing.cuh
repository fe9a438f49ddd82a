// Timing helpers shared by cohort's benchmarks: event-timed medians over repeated runs after
// warm-ups, as nccl-tests and METHOD.md do.
#pragma once

#include <cohort/cohort.cuh>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

namespace bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Median milliseconds of `run` (which enqueues work ordered after `origin` and joins back to it),
// timed by events on `origin`.
inline double time_ms(cohort::stream_ref origin, const std::function<void()>& run, int warmups = 3,
                      int reps = 20) {
  cohort::event start(origin.device(), cohort::event::timing::on);
  cohort::event stop(origin.device(), cohort::event::timing::on);
  for (int i = 0; i < warmups; ++i)
    run();
  origin.synchronize();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    start.record(origin);
    run();
    stop.record(origin);
    stop.synchronize();
    ms.push_back(cohort::elapsed(start, stop).count());
  }
  return median(ms);
}

// Medians of `time(run)` for each of `runs`, sampled in turns after `warmups` runs of each: every
// sample times each run once, the first one rotating (a b c, then b c a, ...), so that what drifts
// during a run (clocks, a pool's state) and what one run leaves to the next (a warm L2) fall on all
// alike: for ratios that should be 1.
template <class Time>
std::vector<double> medians_in_turns(Time&& time, const std::vector<std::function<void()>>& runs,
                                     int warmups, int samples) {
  for (int i = 0; i < warmups; ++i)
    for (const auto& run : runs)
      run();
  std::vector<std::vector<double>> per(runs.size());
  for (int i = 0; i < samples; ++i)
    for (std::size_t j = 0; j < runs.size(); ++j) {
      const std::size_t k = (std::size_t(i) + j) % runs.size();
      per[k].push_back(time(runs[k]));
    }
  std::vector<double> out;
  for (auto& v : per)
    out.push_back(median(std::move(v)));
  return out;
}

// Median milliseconds of each of `runs` (each enqueues work ordered after `origin` and joins back
// to it), timed by events on `origin` in turns (medians_in_turns), `3 * reps` samples each.
inline std::vector<double> time_ms_in_turns(cohort::stream_ref origin,
                                            const std::vector<std::function<void()>>& runs,
                                            int warmups = 3, int reps = 20) {
  cohort::event start(origin.device(), cohort::event::timing::on);
  cohort::event stop(origin.device(), cohort::event::timing::on);
  return medians_in_turns(
      [&](const std::function<void()>& run) {
        start.record(origin);
        run();
        stop.record(origin);
        stop.synchronize();
        return cohort::elapsed(start, stop).count();
      },
      runs, warmups, 3 * reps);
}

// The same for two runs `a` and `b`.
inline std::pair<double, double> paired_time_ms(cohort::stream_ref origin,
                                                const std::function<void()>& a,
                                                const std::function<void()>& b, int warmups = 3,
                                                int reps = 20) {
  const auto ms = time_ms_in_turns(origin, {a, b}, warmups, reps);
  return {ms[0], ms[1]};
}

// Median host microseconds per call of each of `calls` (each a call, and the sync that ends its
// batches so queues never fill), measured in turns: each round times a batch of every one in
// order, so that what drifts during a run (clocks, the host's other work) falls on all alike.
inline std::vector<double> host_us_per_call_in_turns(
    const std::vector<std::pair<std::function<void()>, std::function<void()>>>& calls,
    int rounds = 30, int batch = 1000) {
  std::vector<std::vector<double>> per(calls.size());
  for (int round = -1; round < rounds; ++round) // round -1 warms up
    for (std::size_t k = 0; k < calls.size(); ++k) {
      const auto& [call, sync] = calls[k];
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < batch; ++i)
        call();
      const auto t1 = std::chrono::steady_clock::now();
      sync();
      if (round >= 0)
        per[k].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / batch);
    }
  std::vector<double> us;
  for (auto& v : per)
    us.push_back(median(std::move(v)));
  return us;
}

// Median host microseconds per call of `call`, over `calls` back-to-back calls, synchronizing by
// `sync` every `batch` calls so queues never fill.
inline double host_us_per_call(const std::function<void()>& call, const std::function<void()>& sync,
                               int calls = 20000, int batch = 1000) {
  return host_us_per_call_in_turns({{call, sync}}, calls / batch, batch)[0];
}

// nccl-tests' method over streams: 5 warm-ups, then 5 rounds of `iters` back-to-back calls of
// `run`, each timed by events on every stream; a round counts its slowest stream. Returns the
// median round's microseconds per call.
template <class Run>
double streams_time_us(const std::vector<cohort::stream_ref>& streams, Run&& run, int iters) {
  std::vector<cohort::event> start, stop;
  for (cohort::stream_ref s : streams) {
    start.emplace_back(s.device(), cohort::event::timing::on);
    stop.emplace_back(s.device(), cohort::event::timing::on);
  }
  for (int w = 0; w < 5; ++w)
    run();
  for (cohort::stream_ref s : streams)
    s.synchronize();
  std::vector<double> rounds;
  for (int round = 0; round < 5; ++round) {
    for (std::size_t i = 0; i < streams.size(); ++i)
      start[i].record(streams[i]);
    for (int k = 0; k < iters; ++k)
      run();
    for (std::size_t i = 0; i < streams.size(); ++i)
      stop[i].record(streams[i]);
    double slowest = 0;
    for (std::size_t i = 0; i < streams.size(); ++i) {
      stop[i].synchronize();
      slowest = std::max(slowest, cohort::elapsed(start[i], stop[i]).count());
    }
    rounds.push_back(slowest * 1e3 / iters);
  }
  return median(rounds);
}

// The same over every member's stream of a group.
template <class Run>
double group_time_us(const cohort::device_group& group, Run&& run, int iters) {
  std::vector<cohort::stream_ref> streams;
  for (std::size_t i = 0; i < group.size(); ++i)
    streams.push_back(group.stream(i));
  return streams_time_us(streams, run, iters);
}

inline void print_environment() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("# %d GPU(s); driver API %d.%d; runtime %d.%d\n", cohort::device_count(),
              driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  for (cohort::device_ref d : cohort::devices()) {
    const auto p = cohort::properties(d);
    std::printf("#   GPU %d: %s, %d SMs, %.0f GiB\n", d.get(), p.name.c_str(), p.multiprocessors,
                p.total_memory / 1073741824.0);
  }
}

} // namespace bench
