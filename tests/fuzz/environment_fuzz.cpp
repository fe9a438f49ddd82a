// libFuzzer target: reading the launcher's environment. Arbitrary values (any bytes, digits of
// any length) under the variables of every launcher: launch_environment_from either throws
// std::invalid_argument or returns what an independent parse of the first complete scheme says,
// with 0 <= rank < world_size and local_rank >= 0.
#include <cohort/communication/launch_environment.cuh>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

namespace {

const char* const names[] = {"RANK",
                             "WORLD_SIZE",
                             "LOCAL_RANK",
                             "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK",
                             "PMI_RANK",
                             "PMI_SIZE",
                             "MPI_LOCALRANKID",
                             "SLURM_PROCID",
                             "SLURM_NTASKS",
                             "SLURM_LOCALID"};

void require(bool condition) {
  if (!condition) std::abort();
}

// The reference: digits only, at most INT_MAX; nullopt for unset or empty; -1 for invalid.
long long reference(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return -2; // unset
  long long v = 0;
  for (char c : it->second) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
    if (v > 2147483647LL) return -1;
  }
  return v;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::map<std::string, std::string> env;
  std::size_t at = 0;
  while (at + 2 <= size) { // (which variable, length) then that many bytes of value
    const char* name = names[data[at] % 12];
    std::size_t length = data[at + 1] % 24;
    at += 2;
    length = std::min(length, size - at);
    env[name] = std::string(reinterpret_cast<const char*>(data + at), length);
    at += length;
  }
  for (auto& [name, value] : env) // the environment cannot hold a NUL inside a value
    value = value.substr(0, value.find('\0'));
  auto lookup = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };

  // What the scheme order says should happen.
  bool expect_throw = false;
  std::optional<cohort::launch_environment> expected;
  for (int scheme = 0; scheme < 4 && !expect_throw && !expected; ++scheme) {
    const long long rank = reference(env, names[3 * scheme]),
                    size = reference(env, names[3 * scheme + 1]);
    if (rank == -1 || size == -1) {
      expect_throw = true;
      break;
    }
    if (rank == -2 || size == -2) continue;
    if (rank >= size) {
      expect_throw = true;
      break;
    }
    const long long local = reference(env, names[3 * scheme + 2]);
    if (local == -1) {
      expect_throw = true;
      break;
    }
    expected = cohort::launch_environment{static_cast<int>(rank), static_cast<int>(size),
                                          static_cast<int>(local == -2 ? rank : local)};
  }
  try {
    const auto got = cohort::launch_environment_from(lookup);
    require(!expect_throw);
    require(got.has_value() == expected.has_value());
    if (got) {
      require(got->rank == expected->rank && got->world_size == expected->world_size &&
              got->local_rank == expected->local_rank);
      require(0 <= got->rank && got->rank < got->world_size && got->local_rank >= 0);
    }
  } catch (const std::invalid_argument&) {
    require(expect_throw);
  }
  return 0;
}
