// The names p2p/p2p_session.cuh's snippet uses: the handle a kernel opens its session from.
#include <cohort/p2p/p2p_handle.cuh>
