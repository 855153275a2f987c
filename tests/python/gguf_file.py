# SPDX-License-Identifier: MIT
"""A GGUF file's metadata and tensors for the numpy reference, read with struct
and numpy over one mapping of the file.

gguf.GGUFReader (from the gguf package, which still writes the synthetic
models and dequantizes here) makes numpy views of every element of every
array: tens of seconds over Gemma 3's 262k-token vocabulary, in each test
that reads it (docs/PERFORMANCE.md 6). This reads the same layout (GGUF v2
and v3, little-endian) in well under a second, and hands out tensors as
GGUFReader does: typed arrays for the float and integer types, bytes per row
for the block formats, numpy shape = the reversed GGUF ne;
gguf.quants.dequantize takes them as they are.
"""
from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType
from gguf.quants import quant_shape_to_byte_shape

V = GGUFValueType
SCALAR_FORMATS = {V.UINT8: "<B", V.INT8: "<b", V.UINT16: "<H", V.INT16: "<h", V.UINT32: "<I",
                  V.INT32: "<i", V.FLOAT32: "<f", V.BOOL: "<?", V.UINT64: "<Q", V.INT64: "<q",
                  V.FLOAT64: "<d"}
Q = GGMLQuantizationType
TYPED_TENSORS = {Q.F32: np.float32, Q.F16: np.float16, Q.F64: np.float64, Q.I8: np.int8,
                 Q.I16: np.int16, Q.I32: np.int32, Q.I64: np.int64}


@dataclass
class Tensor:
    name: str
    tensor_type: GGMLQuantizationType
    shape: tuple[int, ...]  # GGUF ne: the innermost dimension first
    data: np.ndarray        # numpy shape: ne reversed (bytes per row for block formats)


class GgufFile:
    def __init__(self, path: str):
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if self._map[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file (magic {self._map[:4]!r})")
        self._at = 4
        version, n_tensors, n_kv = self._read("<I"), self._read("<Q"), self._read("<Q")
        if version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {version} (2 and 3 are read)")
        self.fields: dict[str, Any] = {}
        self.types: dict[str, tuple[GGUFValueType, ...]] = {}  # (ARRAY, item type) for arrays, as GGUFReader's
        for _ in range(n_kv):
            key, kind = self._string(), GGUFValueType(self._read("<I"))
            self.types[key] = (kind, GGUFValueType(struct.unpack_from("<I", self._map, self._at)[0])) \
                if kind == V.ARRAY else (kind,)
            self.fields[key] = self._value(kind)
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            ne = tuple(self._read("<Q") for _ in range(self._read("<I")))
            infos.append((name, GGMLQuantizationType(self._read("<I")), ne, self._read("<Q")))
        align = int(self.fields.get("general.alignment", 32))
        start = -(-self._at // align) * align
        self.tensors: list[Tensor] = []
        for name, kind, ne, offset in infos:
            shape = tuple(reversed(ne))
            n = int(np.prod(ne))
            if kind in TYPED_TENSORS:
                data = np.frombuffer(self._map, TYPED_TENSORS[kind], n, start + offset).reshape(shape)
            else:
                block, size = GGML_QUANT_SIZES[kind]
                data = np.frombuffer(self._map, np.uint8, n // block * size, start + offset)
                data = data.reshape(quant_shape_to_byte_shape(shape, kind))
            self.tensors.append(Tensor(name, kind, ne, data))

    def _read(self, fmt: str):
        value = struct.unpack_from(fmt, self._map, self._at)[0]
        self._at += struct.calcsize(fmt)
        return value

    def _string(self) -> str:
        n = self._read("<Q")
        self._at += n
        return self._map[self._at - n:self._at].decode("utf-8", errors="replace")

    def _value(self, kind: GGUFValueType) -> Any:
        if kind == V.STRING:
            return self._string()
        if kind == V.ARRAY:
            item, n = GGUFValueType(self._read("<I")), self._read("<Q")
            if item in SCALAR_FORMATS and item != V.BOOL:
                values = np.frombuffer(self._map, SCALAR_FORMATS[item], n, self._at)
                self._at += values.nbytes
                return values.tolist()
            return [self._value(item) for _ in range(n)]
        return self._read(SCALAR_FORMATS[kind])
