"""`GET /health` for hosts and container health checks: 200 `{"status": "ok", "preset": NAME}` when both
engines are ready, 503 with "loading" or "error" otherwise. The body carries the state and the preset
name only: no messages (they can hold paths), no process ids. No Gradio import: the route goes onto the
FastAPI app that Gradio creates, either once it runs (`add_health_route(demo.server_app, manager)`, what
app.py does) or when Gradio creates it (`demo.launch(app_kwargs={"routes": [health_route(manager)]})`).
"""

from __future__ import annotations

from specplay.page.manager import ManagerStatus

HEALTH_PATH = "/health"

# PairManager states: idle (before the first load, after shutdown) | loading | ready | error
_STATUS = {"ready": "ok", "loading": "loading", "idle": "loading", "error": "error"}


def health_response(status: ManagerStatus) -> tuple[int, dict]:
    """(HTTP status code, JSON body) for the manager's status."""
    state = _STATUS.get(status.state, "error")
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
