"""A TensorProto's values as a flat numpy array: one reading for scalar tensors (distcore.events)
and histogram tensors (distcore.histograms), so both decode dtypes alike. A leaf: no distcore
imports, so either package can use it without an import cycle."""

from __future__ import annotations

from typing import Final

import numpy as np
from tensorboard.compat.proto import tensor_pb2, types_pb2

# TensorProto dtype -> (numpy dtype of tensor_content, repeated field holding values otherwise).
DTYPES: Final[dict[int, tuple[str, str]]] = {
    types_pb2.DT_FLOAT: ("<f4", "float_val"),
    types_pb2.DT_DOUBLE: ("<f8", "double_val"),
    types_pb2.DT_HALF: ("<f2", "half_val"),
    types_pb2.DT_INT8: ("<i1", "int_val"),
    types_pb2.DT_INT16: ("<i2", "int_val"),
    types_pb2.DT_INT32: ("<i4", "int_val"),
    types_pb2.DT_INT64: ("<i8", "int64_val"),
    types_pb2.DT_UINT8: ("<u1", "int_val"),
    types_pb2.DT_UINT16: ("<u2", "int_val"),
    types_pb2.DT_UINT32: ("<u4", "uint32_val"),
    types_pb2.DT_UINT64: ("<u8", "uint64_val"),
    types_pb2.DT_BOOL: ("?", "bool_val"),
}
FLOATS: Final = (types_pb2.DT_DOUBLE, types_pb2.DT_FLOAT, types_pb2.DT_HALF)


def tensor_values(proto: tensor_pb2.TensorProto) -> np.ndarray:
    """The values, flat, from `tensor_content` or the dtype's repeated field (half floats are
    stored as their bit patterns in `half_val`). The caller has checked `proto.dtype in DTYPES`."""
    np_dtype, repeated = DTYPES[proto.dtype]
    if proto.tensor_content:
        return np.frombuffer(proto.tensor_content, dtype=np_dtype)
    values = np.asarray(getattr(proto, repeated))
    if proto.dtype == types_pb2.DT_HALF:
        values = values.astype(np.uint16).view(np.float16)
    return values
