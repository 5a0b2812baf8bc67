"""libjxl's recursive Gaussian: op (``ops.py``), Triton kernel, numba CPU kernel and twin."""
