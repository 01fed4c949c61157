"""A GGUF file's header, bounded: its metadata key/values and tensor names, never its weights (a model's shape
from GGUF metadata: plan.shapes). The `gguf` package's GGUFReader parses every tokenizer array into numpy and
takes seconds on a small CPU; this takes ~0.1 s.

Read as core.reading reads every file: a regular file only (a FIFO would hang the open), at most
GGUF_HEADER_MAX_BYTES of it (read as the parser needs them, never a length the file claims), every count and
length checked against what is left of that before it is used (a claimed 2^40 tensors or a 4 GiB key is
refused, not looped over or allocated), arrays nested at most MAX_DEPTH deep. A file that breaks any of it is
an UnreadableInput of one line naming it."""

from __future__ import annotations

import struct
from pathlib import Path

from specplay.core.reading import GGUF_HEADER_MAX_BYTES, MAX_DEPTH, UnreadableInput, open_regular, size_text

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_MAX_DIMS = 8  # ggml's GGML_MAX_DIMS is 4
# the fewest bytes an item of each kind takes: what a count is checked against (a string: its length field)
_SMALLEST = {**{kind: struct.calcsize(fmt) for kind, fmt in _SCALARS.items()}, _STRING: 8, _ARRAY: 12}
_U64 = struct.Struct("<Q")
_KV_SMALLEST, _TENSOR_SMALLEST = 8 + 4 + 1, 8 + 4 + 4 + 8  # key + type + a byte; name + dims + type + offset


class _Header:
    """The file's first bytes, read in growing chunks as the parser asks for them, never past `cap`."""

    def __init__(self, f, path: Path, cap: int):
        self.f, self.path, self.cap = f, path, cap
        self.data, self.pos = bytearray(), 0

    def fail(self, why: str) -> UnreadableInput:
        return UnreadableInput(f"{self.path}: {why}")

    def need(self, n: int) -> int:
        """The offset of the next n bytes, read in if they aren't yet; refused past the cap or the file's end."""
        start, end = self.pos, self.pos + n
        if end > self.cap:
            raise self.fail(f"its GGUF metadata runs past the {size_text(self.cap)} limit (a count or length of "
                            f"{n:,} bytes at byte {start:,})")
        while end > len(self.data):
            chunk = self.f.read(min(max(len(self.data), 1 << 20), self.cap - len(self.data)))
            if not chunk:
                raise self.fail("GGUF header cut short")
            self.data += chunk
        self.pos = end
        return start

    def unpack(self, fmt: str):
        return struct.unpack_from(fmt, self.data, self.need(struct.calcsize(fmt)))[0]

    def count(self, smallest: int, what: str) -> int:
        """A u64 count of items of at least `smallest` bytes each, refused where they can't fit what is left."""
        n = self.unpack("<Q")
        if n * smallest > self.cap - self.pos:
            raise self.fail(f"{n:,} {what} can't fit its {size_text(self.cap)} of GGUF metadata")
        return n

    def string(self) -> str:
        n = self.count(1, "bytes of a string")
        start = self.need(n)
        return bytes(self.data[start:start + n]).decode("utf-8", errors="replace")

    def skip_strings(self, n: int) -> None:
        """Past n strings (a tokenizer's vocabulary: ~10^5 of them), with need()'s checks only where the
        bytes aren't read in yet (the hot loop: a third of the time of calling it per string)."""
        u64, data = _U64.unpack_from, self.data
        for _ in range(n):
            start = self.pos
            if start + 8 > len(data):
                self.need(8)
                self.pos = start
            end = start + 8 + u64(data, start)[0]
            if end > len(data):
                self.need(end - start)
            self.pos = end

    def value(self, kind: int, depth: int = 1):
        """A metadata value; an array as its length only."""
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise self.fail(f"unknown GGUF value type {kind}")
        if depth > MAX_DEPTH:
            raise self.fail(f"GGUF arrays nested deeper than {MAX_DEPTH} levels")
        item_kind = self.unpack("<I")
        if item_kind not in _SMALLEST:
            raise self.fail(f"unknown GGUF value type {item_kind}")
        n = self.count(_SMALLEST[item_kind], "array items")
        if item_kind in _SCALARS:
            self.need(n * _SMALLEST[item_kind])
        elif item_kind == _STRING:
            self.skip_strings(n)
        else:
            for _ in range(n):
                self.value(item_kind, depth + 1)
        return n


def read_gguf_metadata(path: Path, cap: int = GGUF_HEADER_MAX_BYTES) -> tuple[dict, list[str]]:
    """(metadata key/values, tensor names) of a GGUF file; arrays are returned as their length only."""
    with open_regular(path, str(path)) as f:
        header = _Header(f, path, cap)
        header.need(4)
        if bytes(header.data[:4]) != b"GGUF":
            raise header.fail("not a GGUF file")
        version = header.unpack("<I")
        if version < 2:
            raise header.fail(f"GGUF version {version} is too old to read")
        n_tensors = header.count(_TENSOR_SMALLEST, "tensors")
        n_kv = header.count(_KV_SMALLEST, "metadata keys")
        meta = {}
        for _ in range(n_kv):
            key = header.string()
            meta[key] = header.value(header.unpack("<I"))
        names = []
        for _ in range(n_tensors):
            names.append(header.string())
            dims = header.unpack("<I")
            if dims > _MAX_DIMS:
                raise header.fail(f"a tensor of {dims:,} dimensions")
            header.need(8 * dims + 4 + 8)  # dims, type, offset
        return meta, names
