// The names communication/launch_environment.cuh's snippet uses.
inline void use(int, int, int) {}
