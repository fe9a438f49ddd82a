// The names execution/graph.cuh's snippet uses: it shows the layers above it at work.
#include <cohort/cohort.cuh>
