"""Routes of the platform's own resources: `/config`."""

from __future__ import annotations

from typing import Any

from ..wire.request import Request
from .registry import route


@route("GET", "/config")
def get_config(request: Request) -> tuple[int, Any]:
    return 200, request.world.platform_config()
