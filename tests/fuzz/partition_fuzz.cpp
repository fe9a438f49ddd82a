// libFuzzer target: the partition math and its argument checks, on arbitrary input. Whatever the
// bytes say (sizes up to 2^64 − 1, weights from denormal to 1e308, NaN, infinity, zero, negative),
// a call throws std::invalid_argument where an argument is invalid and only there, and otherwise
// returns a partition that covers [0, n) exactly, with the promised shape; adaptive weights stay
// finite, positive and summing to one.
#include <cohort/partitioning/adaptive_weights.cuh>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

namespace {

class input {
 public:
  input(const std::uint8_t* data, std::size_t size)
      : data_(data)
      , size_(size) {}
  template <class T>
  T take() {
    T value{};
    const std::size_t n = std::min(sizeof(T), size_ - at_);
    std::memcpy(&value, data_ + at_, n);
    at_ += n;
    return value;
  }
  bool empty() const { return at_ >= size_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_, at_ = 0;
};

void require(bool condition) {
  if (!condition) std::abort(); // libFuzzer reports the crash and keeps the input
}

void check_cover(const cohort::partition& p, std::size_t n) {
  require(p.size() == n);
  std::size_t at = 0;
  for (std::size_t d = 0; d < p.parts(); ++d) {
    require(p.offset(d) == at);
    at += p.count(d);
  }
  require(at == n);
}

// A size: small ones often (edges), any 64-bit value sometimes.
std::size_t size_from(input& in) {
  const auto kind = in.take<std::uint8_t>() % 4;
  const auto raw = in.take<std::uint64_t>();
  switch (kind) {
  case 0:
    return raw % 64;
  case 1:
    return raw % 100000;
  case 2:
    return std::numeric_limits<std::size_t>::max() - raw % 4;
  default:
    return raw;
  }
}

double weight_from(input& in) {
  const auto kind = in.take<std::uint8_t>() % 8;
  switch (kind) {
  case 0:
    return in.take<double>(); // any bits: NaN, infinities, negatives, denormals
  case 1:
    return 0.0;
  case 2:
    return std::numeric_limits<double>::denorm_min() * (1 + in.take<std::uint8_t>());
  case 3:
    return 1e308 / (1 + in.take<std::uint8_t>());
  default:
    return 1.0 + in.take<std::uint16_t>() / 1000.0;
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in(data, size);
  const std::size_t n = size_from(in);
  const std::size_t parts = in.take<std::uint8_t>() % 33; // 0 is a bad argument

  try { // even: counts differ by at most one, larger ones first
    const auto p = cohort::partition::even(n, parts);
    require(parts > 0 && p.parts() == parts);
    check_cover(p, n);
    for (std::size_t d = 1; d < parts; ++d)
      require(p.count(d) <= p.count(d - 1) && p.count(0) - p.count(d) <= 1);
  } catch (const std::invalid_argument&) {
    require(parts == 0);
  }

  std::vector<double> weights(parts);
  bool valid = parts > 0;
  for (double& w : weights) {
    w = weight_from(in);
    valid = valid && std::isfinite(w) && w > 0.0;
  }
  try { // weighted: each count within one item of its exact share
    const auto p = cohort::partition::weighted(n, weights);
    require(valid);
    check_cover(p, n);
    long double top = 0;
    for (double w : weights)
      top = std::max<long double>(top, w);
    long double total = 0;
    for (double w : weights)
      total += w / top;
    for (std::size_t d = 0; d < parts; ++d) {
      const long double exact = static_cast<long double>(n) * (weights[d] / top) / total;
      const long double off = std::fabs(static_cast<long double>(p.count(d)) - exact);
      require(off <= 1.0L + 1e-12L * static_cast<long double>(n));
    }
  } catch (const std::invalid_argument&) {
    require(!valid);
  }

  { // from_counts: any counts, refused only where there are none or their sum passes the
    // address space; valid ones are taken exactly as given
    std::vector<std::size_t> counts(parts);
    bool overflows = false;
    std::size_t sum = 0;
    for (std::size_t& c : counts) {
      c = size_from(in);
      overflows = overflows || c > std::numeric_limits<std::size_t>::max() - sum;
      sum += c;
    }
    const bool valid_counts = parts > 0 && !overflows;
    try {
      const auto p = cohort::partition::from_counts(counts);
      require(valid_counts);
      require(p.counts() == counts);
      check_cover(p, sum);
    } catch (const std::invalid_argument&) {
      require(!valid_counts);
    }
  }

  if (parts > 0) { // adaptive weights under arbitrary measurements
    try {
      cohort::adaptive_weights w(parts, 0.05 + (in.take<std::uint8_t>() % 20) / 20.0);
      for (int round = 0; round < 8 && !in.empty(); ++round) {
        const auto used = w.split(n);
        check_cover(used, n);
        std::vector<double> seconds(parts);
        for (double& s : seconds)
          s = weight_from(in);
        w.record(used, seconds);
        double sum = 0;
        for (double x : w.weights()) {
          require(std::isfinite(x) && x > 0.0);
          sum += x;
        }
        require(std::fabs(sum - 1.0) < 1e-9);
      }
    } catch (const std::invalid_argument&) {
      std::abort(); // every argument here was valid
    }
  }
  return 0;
}
