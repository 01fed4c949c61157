"""`diff A B`: two recordings (`compare --record`) or two bench results side by side: per prompt or per bench
row, the speedup and its factors on each side, the change, and whether it is beyond noise (bench.diff)."""

from __future__ import annotations

import json
import sys

from specplay.cli.base import EXIT_OK, EXIT_RUN_ERROR, CLISubcommand, UsageError, console

EXIT_CODES = ("exit codes: 0 compared, 1 speculation got slower beyond noise (with --fail-if-slower), "
              "2 a file that isn't a recording or bench result (one line naming the bad field)")


def interval_text(interval) -> str:
    return f" [{interval.low:.3f}, {interval.high:.3f}]" if interval is not None else ""


def value_text(value, interval) -> str:
    return "—" if value is None else f"{value:.3f}{interval_text(interval)}"


def verdict(figure) -> str:
    if figure.change is None:
        return ""
    if not figure.beyond_noise:
        return "within noise"
    return "better" if figure.better else "WORSE"


def print_diff(diff, stream=None) -> None:
    """The table: one block of three lines (speedup, tokens/step, step cost) per prompt or bench row."""
    from rich.table import Table

    from specplay.bench.diff import FIGURES

    out = console(stream)
    for name, side in (("A", diff.a), ("B", diff.b)):
        out.print(f"{name}: {side.path}\n   {side.about}")
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("prompt" if diff.kind == "recordings" else "row", "figure", "A", "B", "change", ""):
        table.add_column(column, justify="right" if column in ("A", "B", "change") else "left")
    labels = {name: label for name, label, _ in FIGURES}
    for row in diff.rows:
        for i, figure in enumerate(row.figures):
            change = "" if figure.change is None else f"{figure.change:+.1%}"
            table.add_row(row.key if i == 0 else "", labels[figure.name], value_text(figure.a, figure.a_interval),
                          value_text(figure.b, figure.b_interval), change, verdict(figure),
                          end_section=i == len(row.figures) - 1)
        if row.note:
            table.add_row("", f"note: {row.note}", "", "", "", "")
    out.print(table)
    for side, keys in (("A", diff.only_a), ("B", diff.only_b)):
        if keys:
            out.print(f"only in {side} (not compared): {', '.join(keys)}")
    out.print(diff.rule)
    slower = [row for row in diff.rows if row.slower]
    if not slower:
        out.print("verdict: speculation no slower beyond noise in B")
        return
    for row in slower:
        why = f" ({', '.join(row.moved)})" if row.moved else ""
        out.print(f"verdict: slower in B: {row.key}{why}")


class DiffCommand(CLISubcommand):
    name = "diff"
    help = "compare two recordings (compare --record) or two bench results, beyond noise or not"
    epilog = EXIT_CODES

    def add_arguments(self, c) -> None:
        c.add_argument("a", metavar="A", help="a recording (or a folder of them), or a bench.json (or its folder)")
        c.add_argument("b", metavar="B", help="the same kind as A, to compare with it")
        c.add_argument("--json", action="store_true", help="print one JSON object")
        c.add_argument("--fail-if-slower", action="store_true",
                       help="exit 1 where speculation's speedup fell beyond noise in any prompt or row")

    def cmd(self, args, pair=None) -> int:
        from specplay.bench.diff import diff
        from specplay.core.reading import UnreadableInput

        try:
            result = diff(args.a, args.b)
        except UnreadableInput as exc:  # a recording's RecordingError too
            raise UsageError(str(exc)) from None
        if args.json:
            print(json.dumps(result.model_dump(mode="json"), allow_nan=False))
        else:
            print_diff(result, sys.stdout)
        return EXIT_RUN_ERROR if args.fail_if_slower and result.slower else EXIT_OK


def cmd_init() -> list[CLISubcommand]:
    return [DiffCommand()]
