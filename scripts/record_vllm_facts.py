"""Record what a vLLM wheel can do (its speculative methods, SpeculativeConfig fields, runners, verifiers, EngineArgs fields)
into a JSON fixture, read from the wheel's own source with ast (specplay.engine.vllm_facts); the wheel is
never installed. The suite feeds the preset catalog these facts to catch, without a GPU, which presets a
vLLM we can't install here refuses or runs (tests/unit/test_presets_vllm034.py).

    pip download --no-deps -d /tmp/v034 vllm==0.34.0
    .venv/bin/python scripts/record_vllm_facts.py --wheel /tmp/v034/vllm-0.34.0-*.whl \
        --out tests/fixtures/vllm-0.34-facts.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specplay.engine.vllm_facts import read_facts, wheel_reader  # noqa: E402


def wheel_version(wheel: Path) -> str:
    match = re.match(r"vllm(?:_cpu)?-([^-]+)-", wheel.name)
    if not match:
        raise SystemExit(f"{wheel.name}: not a vllm wheel's file name")
    return match.group(1)


def record(wheel: Path) -> dict:
    facts = read_facts(wheel_reader(wheel))
    if facts is None:
        raise SystemExit(f"{wheel.name}: no vllm/config/speculative.py inside")
    command = f"scripts/record_vllm_facts.py --wheel {wheel.name} --out <this file>"
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return {"_recorded_by": command, "_wheel": wheel.name, "_wheel_sha256": digest, "version": wheel_version(wheel), **facts,
            "custom_methods": []}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", type=Path, required=True, help="a vllm wheel (.whl), e.g. from pip download")
    parser.add_argument("--out", type=Path, help="the JSON file to write (default: print it)")
    args = parser.parse_args(argv)
    text = json.dumps(record(args.wheel), indent=1, sort_keys=True) + "\n"
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
