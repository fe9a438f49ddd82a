// The names p2p/p2p_handle.cuh's snippet uses.
#define COHORT_SNIPPET_PARAMETERS cohort::p2p_clique &peers, cohort::distributed_buffer<float>&x
