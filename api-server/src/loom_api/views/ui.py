"""The web page at `/ui/`: three static files (`loom_api/ui/`) that draw each tenant's
topology, the transport nodes and the warnings from the API with the caller's token (the
files themselves hold no data, so they need none). Served with a content security policy
that allows only this server's scripts, styles and API.
"""

from __future__ import annotations

from importlib.resources import files

from flask import Blueprint, Response, redirect

bp = Blueprint("ui", __name__)

FILES = {"": ("index.html", "text/html"), "app.js": ("app.js", "text/javascript"),
         "app.css": ("app.css", "text/css")}  # fmt: skip
"""Path under /ui/ -> (file, media type): nothing else is served."""
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


@bp.get("/ui")
def ui_root() -> Response:
    """The page lives at /ui/ (its files are relative to it)."""
    return redirect("/ui/", code=301)  # type: ignore[return-value]


@bp.get("/ui/", defaults={"name": ""})
@bp.get("/ui/<name>")
def ui_file(name: str) -> Response:
    """One of the page's files (404 for any other name)."""
    if name not in FILES:
        return Response("not found\n", status=404, mimetype="text/plain")
    filename, media_type = FILES[name]
    body = (files("loom_api") / "ui" / filename).read_bytes()
    response = Response(body, mimetype=media_type)
    response.headers["Content-Security-Policy"] = POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "no-cache"
    return response
