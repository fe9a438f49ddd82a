// The names training/sharded_parameters.cuh's snippet uses: a model's layers (their sizes, the
// members' shards of their weights and gradients, one span per member), its forward and backward
// passes on the gathered weights, and the update of one member's shard.
#include "sharded_model.cuh"

#define COHORT_SNIPPET_PARAMETERS                                                                  \
  cohort::device_group &group, cohort::p2p_clique &peers, std::vector<cohort::stream>&compute,     \
      int layers
