// The names memory/memory_resource.cuh's snippet uses.
#include <cohort/memory/device_buffer.cuh>

#define COHORT_SNIPPET_PARAMETERS cohort::stream_ref stream
