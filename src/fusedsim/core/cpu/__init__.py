"""numba helpers shared by the CPU kernels: parallel row loops, float32 arithmetic, table look-ups, borders,
integer frames as numpy. Importing this package sets numba's vector width (:mod:`.vector_width`)."""

from fusedsim.core.cpu.vector_width import prefer_full_vector_width

prefer_full_vector_width()
