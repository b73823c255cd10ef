"""Where the routes meet: each `routes/<resource>.py` registers its handlers with `@route`, and
`dispatch` answers a request from the table they fill.

`dispatch` maps a request (path relative to the version root, parsed query, parsed JSON body) to
the world and returns `(status, JSON value)`, or raises `ServiceError`. Methods of the interface
the sandbox does not serve on a path it serves answer 501 NOT_IMPLEMENTED, unknown paths 404, any
other method 405 with `Allow` (in the error shape; the loopback server hands every method to the
app).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ServiceError
from ..wire.request import Handler, Request
from ..world.world import World

#: Every served route: path template -> method -> handler (filled by `@route` as modules import).
ROUTES: dict[str, dict[str, Handler]] = {}
#: Methods the interface defines on paths the sandbox serves only in part (501 for these).
INTERFACE_ONLY: dict[str, frozenset[str]] = {
    "/cards": frozenset({"POST"}),
    "/customers": frozenset({"POST"}),
    "/customers/{id}": frozenset({"DELETE"}),
    "/customers/external-accounts": frozenset({"POST"}),
    "/platform/external-accounts": frozenset({"POST"}),
    "/config": frozenset({"PATCH"}),
}
_TEMPLATES: list[str] = []  # ROUTES' templates, literal segments before {id}


def route(method: str, template: str) -> Callable[[Handler], Handler]:
    """Register the decorated handler for `method` on the path `template` (`{id}`: an argument)."""

    def register(handler: Handler) -> Handler:
        methods = ROUTES.setdefault(template, {})
        if method in methods:
            raise ValueError(f"{method} {template} is registered twice")
        methods[method] = handler
        _TEMPLATES[:] = sorted(ROUTES, key=lambda t: t.count("{"))  # literal segments win
        return handler

    return register


def _match(path: str) -> tuple[str, list[str]] | None:
    parts = path.rstrip("/").split("/") if path != "/" else [""]
    for template in _TEMPLATES:
        pattern = template.split("/")
        if len(pattern) != len(parts):
            continue
        args = []
        for want, got in zip(pattern, parts, strict=True):
            if want.startswith("{"):
                if not got:
                    break
                args.append(got)
            elif want != got:
                break
        else:
            return template, args
    return None


def dispatch(
    world: World,
    method: str,
    path: str,
    params: dict[str, list[str]],
    body: Any | None,
    headers: Mapping[str, str],
) -> tuple[int, Any]:
    """Answer one request: `(status, JSON value)` (None for 204), or raise ServiceError."""
    matched = _match(path)
    if matched is None:
        raise ServiceError(404, "NOT_FOUND", f"no route {path}")
    template, args = matched
    handler = ROUTES[template].get(method.upper())
    if handler is None:
        if method.upper() in INTERFACE_ONLY.get(template, ()):
            raise ServiceError(
                501, "NOT_IMPLEMENTED", f"{method} {template} is not served by the sandbox"
            )
        raise ServiceError(
            405,
            "METHOD_NOT_ALLOWED",
            f"{method} is not allowed on {template}",
            headers={
                "Allow": ", ".join(sorted({*ROUTES[template], *INTERFACE_ONLY.get(template, ())}))
            },
        )
    return handler(Request(world, args, params, body, headers))
