"""Compiled CPU kernels (numba) registered as the ``cpu`` side of ops: the twins' exact results, faster.

Each module is imported only when its op runs on the CPU under the ``auto`` backend; importing this package
imports nothing.
"""
