// The names errors/argument_error.cuh's snippet uses.
#include <cohort/execution/device_group.cuh>
