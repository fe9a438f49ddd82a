#include <cstddef>
#include <cstdio>

std::size_t unit_a_parts();
std::size_t unit_b_parts();

int main() {
  const bool ok = unit_a_parts() == 4 && unit_b_parts() == 5;
  std::puts(ok ? "two translation units agree" : "two translation units disagree");
  return ok ? 0 : 1;
}
