"""The REST adapter (FastAPI): each handler parses, makes one library call, formats, and maps errors to one JSON
shape `{"error": CODE, "message": ...}`.

Where things are: `app` assembles the app (`create_app`, `app_from_env`); `routes/` holds one module per resource
group, each route beside its request and response models; `deps` gives routes the library and the caller's
tenant (from the API key); `errors` maps every failure to its status and JSON; `guard` is the middleware every
request passes; `idempotency` makes retries safe; `web` serves the page; `run` is `ragd serve`."""

from __future__ import annotations

from .app import app_from_env, create_app
from .guard import CONTENT_SECURITY_POLICY
from .run import SHUTDOWN_GRACE_S, ServerConfig, run_server

__all__ = ["CONTENT_SECURITY_POLICY", "SHUTDOWN_GRACE_S", "ServerConfig", "app_from_env", "create_app", "run_server"]
