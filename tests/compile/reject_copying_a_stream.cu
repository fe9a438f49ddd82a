// Must not compile: copying an owning stream (two owners would destroy it twice).
#include <cohort/cohort.cuh>

int main() {
  cohort::stream a(cohort::device_ref{0});
  cohort::stream b = a;
}
