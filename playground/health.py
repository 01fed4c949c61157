"""`GET /health` for hosts and container health checks: 200 `{"status": "ok", "preset": NAME}` when both
engines are ready, 503 with "loading" or "error" otherwise. The body carries the state and the preset
name only: no messages (they can hold paths), no process ids. No Gradio import: the route goes onto the
FastAPI app that Gradio creates (`add_health_route(demo.server_app, manager)`).
"""

from __future__ import annotations

from playground.pair_manager import ManagerStatus

HEALTH_PATH = "/health"

# PairManager states: idle (before the first load, after shutdown) | loading | ready | error
_STATUS = {"ready": "ok", "loading": "loading", "idle": "loading", "error": "error"}


def health_response(status: ManagerStatus) -> tuple[int, dict]:
    """(HTTP status code, JSON body) for the manager's status."""
    state = _STATUS.get(status.state, "error")
    return (200 if state == "ok" else 503), {"status": state, "preset": status.preset}


def add_health_route(app, manager) -> None:
    """Serve GET /health on `app` (a FastAPI / Starlette app), ahead of every other route, without login:
    a health check has no credentials."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def health(request):
        code, body = health_response(manager.status())
        return JSONResponse(body, status_code=code, headers={"Cache-Control": "no-store"})

    app.router.routes.insert(0, Route(HEALTH_PATH, health, methods=["GET"], name="health"))
