// The names devices/device_ref.cuh's snippet uses.
#include <cstdio>
