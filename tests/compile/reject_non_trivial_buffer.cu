// Must not compile: a device_buffer of a type whose bytes cannot simply be copied.
#include <cohort/cohort.cuh>

#include <string>

int main() {
  cohort::stream s(cohort::device_ref{0});
  cohort::device_buffer<std::string> strings(4, s);
}
