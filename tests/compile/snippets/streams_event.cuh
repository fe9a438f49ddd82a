// The names streams/event.cuh's snippet uses.
void work(cohort::stream_ref);
#define COHORT_SNIPPET_PARAMETERS cohort::device_ref dev, cohort::stream_ref s
