// The names streams/event_ref.cuh's snippet uses.
#include <cohort/streams/event.cuh>

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_ref device, cohort::stream_ref producer, cohort::stream_ref consumer
