// The names p2p/p2p_clique_options.cuh's snippet uses: the clique the options make, and its group.
#include <cohort/p2p/p2p_clique.cuh>

#define COHORT_SNIPPET_PARAMETERS const cohort::device_group &group
