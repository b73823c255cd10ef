"""Wallet credentials and sessions (`client.auth`): listing now; the signed-retry writes
(spec §4.2, §5) build on this module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from paylens import models as m

from . import _params as p
from ._policy import Call
from ._resources import _parse_data_list, _Resource

if TYPE_CHECKING:
    from ._clients import AsyncClient, Client


class _Credentials(_Resource):
    def list(self, account_id: str) -> list[m.AuthMethod]:
        """The wallet credentials of an account (not paginated)."""
        params = {"accountId": p.text("account_id", account_id)}
        return self._run(
            Call("GET", "auth/credentials", _parse_data_list(m.AuthMethod), params=params)
        )


class _Sessions(_Resource):
    def list(self, account_id: str) -> list[m.AuthSession]:
        """The wallet sessions of an account (not paginated)."""
        params = {"accountId": p.text("account_id", account_id)}
        return self._run(
            Call("GET", "auth/sessions", _parse_data_list(m.AuthSession), params=params)
        )


class Auth(_Resource):
    """Wallet credentials and sessions (`client.auth.credentials`, `client.auth.sessions`)."""

    def __init__(self, client: Client | AsyncClient) -> None:
        super().__init__(client)
        self.credentials = _Credentials(client)
        self.sessions = _Sessions(client)
