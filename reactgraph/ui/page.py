"""The debugger page's routes: its files from static/ under /ui, each with a strict Content-Security-Policy.

The files hold no data — the page fetches everything from the API, with the caller's credentials — so they are
served without auth, as /openapi.json is: a browser adds no API key to a navigation, and a page behind a 401
could never ask for one. Every API call the page makes is authenticated as any client's, and the Host and Origin
checks apply to the page's files as to the API. The policy lets the page load only its own files and talk only to
its own origin: no inline script or style, no frame around it, and Trusted Types with no policy, so that an HTML
sink (`innerHTML`) throws instead of rendering tool or model text as markup.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from reactgraph.service.api_common import error_response
from reactgraph.service.server_config import BadServerConfig, LanggraphConfig

PREFIX = "/ui"
STATIC = Path(__file__).with_name("static")
CSP = "; ".join((
    # blob: images are the comparisons' plots, fetched by the page with its credentials (they are API data)
    "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' blob:", "connect-src 'self'",
    "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
    "require-trusted-types-for 'script'", "trusted-types 'none'",
))
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cache-control": "no-cache",  # revalidated: a new version's modules never meet an old one's in a browser cache
}
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}


@cache
def page_files() -> dict[str, tuple[bytes, str]]:
    """File name → (content, media type) of every file the page is made of, read once per process."""
    return {path.name: (path.read_bytes(), TYPES[path.suffix]) for path in sorted(STATIC.iterdir())
            if path.is_file() and path.suffix in TYPES}


async def page_file(request: Request) -> Response:
    """One of the page's files (index.html at /ui/); only the names in static/ exist, so no path leads out."""
    name = request.path_params.get("name") or "index.html"
    found = page_files().get(name)
    if found is None:
        return error_response(404, f"the debugger page has no file {name[:100]!r}")
    content, media_type = found
    return Response(content, media_type=media_type, headers=HEADERS)


async def to_folder(_request: Request) -> Response:
    # relative, so that the page's own relative links and API calls work behind a proxy's path prefix too
    return RedirectResponse("ui/", status_code=308, headers=HEADERS)


def page_routes() -> list[BaseRoute]:
    """The routes that serve the page under PREFIX (GET, and HEAD with it)."""
    return [Route(PREFIX, to_folder, methods=["GET"]), Route(f"{PREFIX}/", page_file, methods=["GET"]),
            Route(f"{PREFIX}/{{name}}", page_file, methods=["GET"])]


def ui_enabled(config: LanggraphConfig, flag: bool | None) -> bool:
    """Whether `reactgraph serve` mounts the page: --ui/--no-ui, else langgraph.json's `reactgraph.ui`, else no."""
    if flag is not None:
        return flag
    value = config.section("reactgraph").get("ui", False)
    if not isinstance(value, bool):
        raise BadServerConfig(f"{config.path}: reactgraph.ui must be true or false, not {value!r}"[:300])
    return value
