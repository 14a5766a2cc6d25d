"""Big weights without copies: external data mapped from its files, and a weightless proto.

A model's external tensors are never read into the protobuf: ``ExternalData.array`` maps
each one from its file (copy-on-write ``mmap``), so loading a model with gigabytes of
weights costs address space, not memory. The ONNX checker and shape inference serialise
the whole proto (and fail past 2 GB); they run on ``weightless`` instead, a copy whose big
initializers are declared as graph inputs of the same type and shape.
"""

from __future__ import annotations

import mmap
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

from engine.errors import ModelLoadError

#: initializers stored in the proto with more raw bytes than this leave the weightless copy
BIG_RAW_BYTES = 16 << 20
#: element types packed several to a byte: read into memory instead of mapped
_PACKED = {getattr(onnx.TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")
           if hasattr(onnx.TensorProto, n)}


def is_external(t: onnx.TensorProto) -> bool:
    return t.data_location == onnx.TensorProto.EXTERNAL


class ExternalData:
    """The external tensors of one model, found relative to the model's folder."""

    def __init__(self, base_dir: str):
        self.root = os.path.realpath(base_dir)
        self._maps: dict[str, mmap.mmap] = {}

    def locate(self, t: onnx.TensorProto) -> tuple[str, int, int | None]:
        """(file, offset, length or None) of an external tensor, after checking them."""
        from onnx.external_data_helper import ExternalDataInfo

        info = ExternalDataInfo(t)
        loc = info.location or ""
        full = os.path.realpath(os.path.join(self.root, loc))
        if not loc or os.path.isabs(loc) or os.path.commonpath([self.root, full]) != self.root:
            raise ModelLoadError(f"tensor {t.name!r} points to external data {loc!r}, which is "
                                 f"not a file name relative to the model's folder {self.root}")
        if not os.path.isfile(full):
            raise ModelLoadError(f"tensor {t.name!r} keeps its data in {loc!r}, but {full} "
                                 "does not exist: copy it next to the model")
        size = os.path.getsize(full)
        offset = int(info.offset or 0)
        length = int(info.length) if info.length else None
        if offset > size or (length and offset + length > size):
            raise ModelLoadError(f"tensor {t.name!r}: external file {loc!r} has {size} bytes, "
                                 f"too few for offset {offset} and length {length}")
        return full, offset, length

    def array(self, t: onnx.TensorProto, dtype: np.dtype) -> np.ndarray:
        """The tensor's values, memory-mapped from its file where the layout allows."""
        full, offset, length = self.locate(t)
        shape = tuple(int(d) for d in t.dims)
        count = int(np.prod(shape, dtype=np.int64))
        if dtype.kind == "O" or t.data_type in _PACKED:
            return self._read(t, full, offset, length)
        nbytes = count * dtype.itemsize
        if (length is not None and length != nbytes) or offset + nbytes > os.path.getsize(full):
            raise ModelLoadError(f"tensor {t.name!r} of shape {list(shape)} needs {nbytes} bytes "
                                 f"of external data, but {os.path.basename(full)!r} holds "
                                 f"{length if length is not None else 'fewer'} from offset "
                                 f"{offset}")
        if count == 0:
            return np.zeros(shape, dtype)
        arr = np.frombuffer(self._map(full), dtype.newbyteorder("<"), count, offset)
        if sys.byteorder != "little" or offset % dtype.itemsize:
            arr = arr.astype(dtype)  # native order, aligned: a copy
        return arr.reshape(shape)

    def _map(self, path: str) -> mmap.mmap:
        if path not in self._maps:
            with open(path, "rb") as f:
                self._maps[path] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        return self._maps[path]

    def _read(self, t: onnx.TensorProto, path: str, offset: int, length: int | None):
        with open(path, "rb") as f:
            f.seek(offset)
            raw = f.read() if length is None else f.read(length)
        inline = onnx.TensorProto()
        inline.CopyFrom(t)
        del inline.external_data[:]
        inline.data_location = onnx.TensorProto.DEFAULT
        inline.raw_data = raw
        return numpy_helper.to_array(inline)


def weightless(proto: onnx.ModelProto, external: ExternalData | None) -> onnx.ModelProto:
    """A copy of ``proto`` for the checker and shape inference, small whatever the weights.

    Main-graph initializers that are external or big become graph inputs of the same type
    and shape; external tensors elsewhere (in subgraphs, attributes) are read in, since
    those scopes cannot take new inputs.
    """
    graph = onnx.GraphProto()
    _copy_fields(proto.graph, graph, skip="initializer")
    inputs = {i.name for i in graph.input}
    for t in proto.graph.initializer:
        if is_external(t) or len(t.raw_data) > BIG_RAW_BYTES:
            if t.name not in inputs:
                graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, t.dims))
        else:
            graph.initializer.add().CopyFrom(t)
    out = onnx.ModelProto()
    _copy_fields(proto, out, skip="graph")
    out.graph.CopyFrom(graph)
    if external is not None:
        from onnx.external_data_helper import _get_all_tensors

        for t in _get_all_tensors(out):
            if is_external(t):
                full, offset, length = external.locate(t)
                t.CopyFrom(numpy_helper.from_array(external._read(t, full, offset, length),
                                                   t.name))
    return out


def _copy_fields(src, dst, skip: str) -> None:
    for field, value in src.ListFields():
        if field.name == skip:
            continue
        repeated = field.is_repeated if hasattr(field, "is_repeated") else \
            field.label == field.LABEL_REPEATED
        if repeated:
            getattr(dst, field.name).extend(value)
        elif field.type == field.TYPE_MESSAGE:
            getattr(dst, field.name).CopyFrom(value)
        else:
            setattr(dst, field.name, value)
