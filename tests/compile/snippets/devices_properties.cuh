// The names devices/properties.cuh's snippet uses.
#include <cstdio>
