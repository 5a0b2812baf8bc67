"""numba helpers shared by the CPU kernels: parallel row loops, float32 arithmetic, table look-ups, borders,
integer frames as numpy."""
