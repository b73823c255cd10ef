"""Where the routes meet: each `routes/<resource>.py` registers its handlers with `@route`, and
`dispatch` answers a request from the table they fill.

`dispatch` maps a request (path relative to the version root, parsed query, parsed JSON body) to
the world and returns `(status, JSON value)`, or raises `ServiceError`. Methods of the interface
the sandbox does not serve on a path it serves answer 501 NOT_IMPLEMENTED, unknown paths 404
REFERENCE_NOT_FOUND (the closest code of the interface's `Error404` list), any
other method 405 with `Allow` (in the error shape; the loopback server hands every method to the
app).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ServiceError, invalid
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
#: The code of a 404 for a path the sandbox does not serve: the interface's `Error404` list has no
#: code for an unknown path, and REFERENCE_NOT_FOUND ("Reference not found") is the closest.
NOT_SERVED = "REFERENCE_NOT_FOUND"
#: Body fields the interface declares nullable, per (method, template); null in any other
#: top-level field of a body is refused (400 naming it), never taken as "absent".
NULLABLE: dict[tuple[str, str], frozenset[str]] = {
    ("PATCH", "/cards/{id}"): frozenset({"maxSpendPerTransaction"}),
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
        raise ServiceError(404, NOT_SERVED, f"no route {path}")
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
    if isinstance(body, dict):
        nullable = NULLABLE.get((method.upper(), template), frozenset())
        nulls = [k for k, v in body.items() if v is None and k not in nullable]
        if nulls:
            raise invalid([{"field": k, "message": "must not be null"} for k in nulls])
    return handler(Request(world, args, params, body, headers))
