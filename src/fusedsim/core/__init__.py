"""Shared building blocks with public names: the backend choice and the one dispatcher (:mod:`.registry`), the
low-overhead launcher (:mod:`.launch`), kernel code generation (:mod:`.codegen`), call tables (:mod:`.calls`),
process state (:mod:`.state`), validation and device helpers, and the kernels several families use: windowed moments
(:mod:`.moments`), the recursive Gaussian (:mod:`.recursive_gaussian`), the XYB colour transform (:mod:`.xyb`),
numba helpers (:mod:`.cpu`). Nothing here imports a family."""
