"""`GET /health` for hosts and container health checks: 200 `{"status": "ok", "preset": NAME}` when both
engines are ready, 503 with "loading", "recovering" (reloading after an engine died, retries left) or
"error" otherwise. The body carries the state and the preset
name only: no messages (they can hold paths), no process ids. No Gradio import: the route goes onto the
FastAPI app that Gradio creates, either once it runs (`add_health_route(demo.server_app, manager)`, what
app.py does) or when Gradio creates it (`demo.launch(app_kwargs={"routes": [health_route(manager)]})`).
"""

from __future__ import annotations

from specplay.hosting.manager import ManagerStatus

HEALTH_PATH = "/health"

# PairManager states: idle (before the first load, after shutdown) | loading | ready | error
_STATUS = {"ready": "ok", "loading": "loading", "idle": "loading", "error": "error"}


def health_response(status: ManagerStatus) -> tuple[int, dict]:
    """(HTTP status code, JSON body) for the manager's status."""
    state = _STATUS.get(status.state, "error")
    if status.recovering and state != "ok":  # reloading after an engine died, retries left: not dead yet
        state = "recovering"
    return (200 if state == "ok" else 503), {"status": state, "preset": status.preset}


def health_route(manager):
    """A Starlette route for GET /health on `manager` (no login: a health check has no credentials)."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def health(request):
        code, body = health_response(manager.status())
        return JSONResponse(body, status_code=code, headers={"Cache-Control": "no-store"})

    return Route(HEALTH_PATH, health, methods=["GET"], name="health")


def add_health_route(app, manager) -> None:
    """Serve GET /health on a running FastAPI / Starlette app (e.g. `demo.server_app`), ahead of its routes."""
    app.router.routes.insert(0, health_route(manager))


# What a container health check counts as alive: serving, or loading / reloading with retries left (a CPU
# reload of the engine that died takes ~50 s on 2 cores). "error" (retries spent, the first load failed, or
# a load past its deadline: the manager's LOAD_TIMEOUT_S, the warm-up's WARMUP_TIMEOUT_S) and no answer are
# dead, so a load that hangs can't keep the container "loading" for good.
ALIVE = ("ok", "loading", "recovering")


def check(url: str, timeout_s: float = 8.0) -> int:
    """The container's HEALTHCHECK: exit status 0 if the page at `url` (its /health) is alive, else 1."""
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            state = json.load(response).get("status")
    except urllib.error.HTTPError as exc:  # 503: loading, recovering or error, in the body
        try:
            state = json.load(exc).get("status")
        except ValueError:
            state = None
    except (OSError, ValueError):
        state = None
    return 0 if state in ALIVE else 1


if __name__ == "__main__":  # python3 -m specplay.hosting.health http://127.0.0.1:7860/health
    import sys

    sys.exit(check(sys.argv[1] if len(sys.argv) > 1 else f"http://127.0.0.1:7860{HEALTH_PATH}"))
