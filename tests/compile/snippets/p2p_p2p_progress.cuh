// The names p2p/p2p_progress.cuh's snippet uses: a clique, and a thread to watch it from.
#include <cohort/p2p/p2p_clique.cuh>

#include <cstdio>
#include <thread>

#define COHORT_SNIPPET_PARAMETERS cohort::p2p_clique &peers
