"""`import`: a preset file from what a vLLM user already runs: their `vllm serve` line(s) or vLLM's `--config`
YAML, read by the installed vLLM's own parser, loaded back through the validation every preset goes through
before it is written (or printed)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from specplay.cli.base import CLISubcommand, UsageError

EXAMPLE = """example (vLLM's dotted flags need no quotes inside the quoted line; a line in a file: "$(cat FILE)"):
  specplay import --out my-pair.yaml --serve-line 'vllm serve Qwen/Qwen3-8B --max-model-len 4096
    --max-num-seqs 8 --kv-cache-dtype fp8 --speculative-config.method ngram
    --speculative-config.num_speculative_tokens 4 --speculative-config.prompt_lookup_max 4
    --speculative-config.prompt_lookup_min 2'
"""


class ImportCommand(CLISubcommand):
    name = "import"
    help = "turn your `vllm serve` line(s) or vLLM --config YAML into a preset file"
    epilog = ("exit codes: 0 ok, 2 a line or config vLLM refuses, lines that differ in their target, or a preset "
              "that doesn't validate\n\n" + EXAMPLE)

    def add_arguments(self, parser) -> None:
        given = parser.add_mutually_exclusive_group(required=True)
        given.add_argument("--serve-line", action="append", metavar="LINE",
                           help="a `vllm serve MODEL ...` line, quoted: the speculative engine's (with "
                                "--speculative-config); give it twice to add the baseline's")
        given.add_argument("--vllm-config", metavar="FILE", help="vLLM's --config YAML (with speculative-config)")
        parser.add_argument("--model", metavar="M", help="with --vllm-config: the MODEL of `vllm serve MODEL "
                            "--config FILE` (wins over the file's model:)")
        parser.add_argument("--name", help="the preset's name (default: --out's file name without .yaml)")
        parser.add_argument("--out", metavar="FILE", help="write the preset here (default: print it)")

    def cmd(self, args, pair=None) -> int:
        import yaml

        from specplay.presets.catalog import PresetError, load_file
        from specplay.presets.importing import left_out, pair_of, preset_data

        name = args.name or (Path(args.out).stem if args.out else None)
        if not name:
            raise UsageError("--name NAME: the preset's name (its file is NAME.yaml), or --out FILE")
        lines, option, source = _read_lines(args)
        speculative, baseline = pair_of(lines, option)
        data = preset_data(name, speculative, baseline, source)
        text = f"# Imported by `specplay import` from {source}.\n" + yaml.safe_dump(data, sort_keys=False, width=110)
        with tempfile.TemporaryDirectory() as folder:  # the file as it will be named: name == its stem
            path = Path(folder) / (Path(args.out).name if args.out else f"{name}.yaml")
            path.write_text(text)
            try:
                preset = load_file(path)
            except PresetError as exc:
                raise type(exc)(" ".join(str(exc).split())) from None
        for phrase in left_out(lines):
            print(f"left out: {phrase}", file=sys.stderr)
        if preset.vllm_problem:
            print(f"note: the installed vLLM can't run it: {preset.vllm_problem}", file=sys.stderr)
        if not args.out:
            sys.stdout.write(text)
            return 0
        out = Path(args.out).expanduser()
        try:
            out.write_text(text)
        except OSError as exc:
            raise UsageError(f"--out: {out}: can't write it ({exc.strerror or type(exc).__name__})") from None
        print(f"wrote {out}; its serve lines: specplay serve-cmd --preset-file {out}")
        return 0


def _read_lines(args):
    """([ServeArgs], the option they came from, where from in words); UsageError for what vLLM refuses."""
    from specplay.engine.vllm_serve_args import ServeLineError, read_serve_line, read_vllm_config

    if args.vllm_config:
        try:
            return [read_vllm_config(args.vllm_config, args.model)], "--vllm-config", Path(args.vllm_config).name
        except ServeLineError as exc:  # the file's own problems already name it
            said = str(exc)
            raise UsageError(said if said.startswith("--vllm-config") else f"--vllm-config: {said}") from None
    if args.model:
        raise UsageError("--model goes with --vllm-config (a serve line names its model)")
    if len(args.serve_line) > 2:
        raise UsageError("--serve-line: at most two, the baseline's and the speculative engine's")
    lines = []
    for number, text in enumerate(args.serve_line, 1):
        try:
            lines.append(read_serve_line(text))
        except ServeLineError as exc:
            which = f" (line {number})" if len(args.serve_line) > 1 else ""
            raise UsageError(f"--serve-line{which}: {exc}") from None
    return lines, "--serve-line", "vllm serve lines"


def cmd_init() -> list[CLISubcommand]:
    return [ImportCommand()]
