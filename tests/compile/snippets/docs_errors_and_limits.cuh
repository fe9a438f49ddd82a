// The names docs/errors_and_limits.md's blocks use.
#include "docs_common.cuh"

#include <cstdio>

#define COHORT_SNIPPET_PARAMETERS cohort::device_group &group
