"""The CPU backend's kernel table. Kernels: ``fn(layer, inputs) -> array | tuple[array, ...]``.

``inputs`` holds NumPy arrays (None for an omitted optional input, a list for a
sequence). A tuple return value means several outputs; anything else is the one
output. Attribute defaults from the ONNX schema are already filled in by the importer.
"""

from engine.backends.base import KernelTable

KERNELS = KernelTable("CPU")
cpu_kernel = KERNELS.kernel
