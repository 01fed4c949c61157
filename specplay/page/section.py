"""One part of the page (a header, a tab) and the components it built, by output name. Each part builds
and wires its own; its handlers return {name: value} (names from `live_run` and `bench_view`), and `out`
turns that into the {component: value} Gradio wants. No Gradio import: components come from the caller."""

from __future__ import annotations


class Section:
    def __init__(self):
        self.c: dict = {}

    def add(self, name: str, component):
        """Keep `component` under `name` and return it (so layout code reads as it did)."""
        self.c[name] = component
        return component

    def __getitem__(self, name: str):
        return self.c[name]

    def list(self, names) -> list:
        return [self.c[n] for n in names]

    def out(self, values: dict) -> dict:
        return {self.c[name]: value for name, value in values.items()}
