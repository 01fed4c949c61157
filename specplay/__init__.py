"""Speculative Decoding Playground: a baseline and a speculative vLLM engine, one prompt, the speedup explained."""

__version__ = "0.5.0"
