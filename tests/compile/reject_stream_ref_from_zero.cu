// Must not compile: a stream_ref made from 0, the legacy default stream.
#include <cohort/cohort.cuh>

int main() {
  cohort::stream_ref s(0);
  (void)s;
}
