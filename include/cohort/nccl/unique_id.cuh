// cohort/nccl/unique_id.cuh — the token every rank of a new NCCL communicator shares.
//
// Rank 0 creates it; the others must receive its bytes (through MPI, a shared file, a key-value
// store). Text form is hex, so it can travel through files and environment variables.
//
//   cohort::unique_id id = cohort::unique_id::create();      // rank 0
//   id.write_file("/shared/job42.id");                       // rank 0
//
//   auto id = cohort::unique_id::read_file("/shared/job42.id", std::chrono::seconds(60));
#pragma once

#include "../errors/argument_error.cuh"
#include "../errors/nccl_error.cuh"
#include "timeouts.cuh"

#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace cohort {

class unique_id {
 public:
  // A fresh id (ncclGetUniqueId): call on one rank only.
  static unique_id create() {
    unique_id id;
    check_nccl(ncclGetUniqueId(&id.id_), "ncclGetUniqueId");
    return id;
  }

  static unique_id from_native(const ncclUniqueId& id) noexcept {
    unique_id u;
    u.id_ = id;
    return u;
  }

  // Hex text of the id's bytes, and back.
  std::string to_hex() const {
    static const char digits[] = "0123456789abcdef";
    std::string text;
    text.reserve(2 * sizeof id_.internal);
    for (char c : id_.internal) {
      const auto byte = static_cast<unsigned char>(c);
      text += digits[byte >> 4];
      text += digits[byte & 15];
    }
    return text;
  }
  static unique_id from_hex(const std::string& text) {
    detail::require_argument(
        text.size() == 2 * sizeof(ncclUniqueId::internal), "unique_id::from_hex", "text",
        "must be " + std::to_string(2 * sizeof(ncclUniqueId::internal)) + " hex digits, got " +
            std::to_string(text.size()) + " characters.");
    auto value = [&](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      detail::throw_invalid_argument("unique_id::from_hex", "text",
                                     std::string("has a character that is not a hex digit: '") + c +
                                         "'.");
    };
    unique_id id;
    for (std::size_t k = 0; k < sizeof id.id_.internal; ++k)
      id.id_.internal[k] = static_cast<char>(value(text[2 * k]) * 16 + value(text[2 * k + 1]));
    return id;
  }

  // Writes the id to `path` (whole, or not at all: through a file renamed into place), with
  // `run` (launch_run_tag) on a second line, so that readers of a later run can tell it is not
  // theirs.
  void write_file(const std::string& path, const std::string& run = {}) const {
    const std::string temporary = path + ".partial";
    {
      std::ofstream out(temporary, std::ios::trunc);
      out << to_hex() << '\n' << run << '\n';
      if (!out.flush())
        detail::throw_invalid_argument("unique_id::write_file", "path",
                                       "cannot write '" + temporary + "'.");
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0)
      detail::throw_invalid_argument("unique_id::write_file", "path",
                                     "cannot rename '" + temporary + "' to '" + path + "'.");
  }

  // Waits up to `timeout` for `path` to hold an id written for `run`, then reads it (else throws
  // cohort::timeout_error). An empty `run` takes whatever id the file holds; otherwise a file
  // tagged for another run (an earlier run's, left behind) is waited past, as if it were not
  // there yet.
  static unique_id read_file(const std::string& path, std::chrono::milliseconds timeout,
                             const std::string& run = {}) {
    const auto give_up = detail::deadline_after(timeout);
    std::string stale;
    while (true) {
      std::ifstream in(path);
      std::string text, tag;
      if (in && std::getline(in, text) && !text.empty()) {
        std::getline(in, tag);
        if (run.empty() || tag == run) return from_hex(text);
        stale = tag.empty() ? "no run" : tag;
      }
      if (std::chrono::steady_clock::now() > give_up)
        throw timeout_error("cohort::unique_id::read_file: '" + path + "' " +
                            (stale.empty()
                                 ? "did not appear within " + std::to_string(timeout.count()) +
                                       " ms; is rank 0 running and writing it to the same path?"
                                 : "holds the id of another run (" + stale + "), not this run's (" +
                                       run + "), and rank 0 did not replace it within " +
                                       std::to_string(timeout.count()) +
                                       " ms; is rank 0 of this run writing the same path?"));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  const ncclUniqueId& native() const noexcept { return id_; }

 private:
  ncclUniqueId id_{};
};

} // namespace cohort
