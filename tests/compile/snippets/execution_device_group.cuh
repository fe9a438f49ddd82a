// The names execution/device_group.cuh's snippet uses.
#include <cassert>

void launch_on(cohort::device_ref, cohort::stream_ref);
#define COHORT_SNIPPET_PARAMETERS cohort::stream_ref main_stream, cudaStream_t handle
