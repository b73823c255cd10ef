"""Credentials and sessions of the embedded wallet accounts (spec §4.2, §5).

Every embedded wallet starts with an EMAIL_OTP credential tied to its customer's email; some also
hold a passkey or an OAuth login. Sessions were opened shortly before the sandbox clock's start
and expire 12 hours after they were opened, so they lapse as the clock moves.

Hooks for the signed-retry writes (add or revoke a credential, verify, refresh or revoke a
session): `challenges` keeps issued 202 challenges by `requestId`, and `add_credential` /
`add_session` / `revoke_session` change the state those writes will act on.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._gen_entities import NO_ROW, Entities, uuid_text
from ._world_entities import SANDBOX_DOMAIN, EntityViews, iso1

SESSION_LIFETIME_US = 12 * 3600 * 1_000_000
_PASSKEY_NAMES = ("iPhone", "MacBook Pro", "YubiKey 5C", "Pixel 8", "Windows Hello")


@dataclass
class Session:
    id: str
    account: int
    credential: dict[str, Any]
    created: int
    expires: int

    def wire(self) -> dict[str, Any]:
        cred = self.credential
        out = {
            "id": self.id,
            "accountId": cred["accountId"],
            "type": cred["type"],
            "nickname": cred["nickname"],
        }
        if "credentialId" in cred:
            out["credentialId"] = cred["credentialId"]
        created = iso1(self.created)
        return out | {"createdAt": created, "updatedAt": created, "expiresAt": iso1(self.expires)}


@dataclass
class WalletAuth:
    credentials: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    sessions: dict[int, list[Session]] = field(default_factory=dict)
    challenges: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def generate(cls, ents: Entities, views: EntityViews, seed: int, now: int) -> WalletAuth:
        a = ents.accounts
        wallets = np.flatnonzero(~a.external & (a.kind == 2) & (a.owner != NO_ROW))
        auth = cls()
        r = random.Random(seed)
        for row in wallets.tolist():
            owner = int(a.owner[row])
            email = f"{views.customer_handle(owner)}@{SANDBOX_DOMAIN}"
            created = int(a.created[row])
            auth.add_credential(row, _credential(r, a.ids[row], "EMAIL_OTP", email, created))
            if r.random() < 0.3:
                auth.add_credential(
                    row, _credential(r, a.ids[row], "PASSKEY", r.choice(_PASSKEY_NAMES), created)
                )
            if r.random() < 0.15:
                auth.add_credential(row, _credential(r, a.ids[row], "OAUTH", email, created))
            for _ in range(r.randrange(0, 3)):
                opened = now - r.randrange(0, SESSION_LIFETIME_US - 3_600_000_000) // 1000 * 1000
                cred = r.choice(auth.credentials[row])
                auth.add_session(
                    Session(f"Session:{_uuid(r)}", row, cred, opened, opened + SESSION_LIFETIME_US)
                )
        return auth

    def is_wallet(self, account: int) -> bool:
        return account in self.credentials

    def add_credential(self, account: int, credential: dict[str, Any]) -> None:
        self.credentials.setdefault(account, []).append(credential)

    def add_session(self, session: Session) -> None:
        self.sessions.setdefault(session.account, []).append(session)

    def revoke_session(self, session_id: str) -> bool:
        for sessions in self.sessions.values():
            for s in sessions:
                if s.id == session_id:
                    sessions.remove(s)
                    return True
        return False

    def list_credentials(self, account: int) -> list[dict[str, Any]]:
        return [dict(c) for c in self.credentials.get(account, [])]

    def list_sessions(self, account: int, now: int) -> list[dict[str, Any]]:
        return [s.wire() for s in self.sessions.get(account, []) if s.expires > now]


def _uuid(r: random.Random) -> str:
    value = r.getrandbits(128)
    value = (value & ~(0xF << 76)) | (0x4 << 76)
    value = (value & ~(0x3 << 62)) | (0x2 << 62)
    return uuid_text(value >> 64, value & (2**64 - 1))


def _credential(
    r: random.Random, account_id: str, kind: str, nickname: str, created: int
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f"AuthMethod:{_uuid(r)}",
        "accountId": account_id,
        "type": kind,
        "nickname": nickname,
    }
    if kind == "PASSKEY":
        out["credentialId"] = base64.urlsafe_b64encode(r.randbytes(32)).rstrip(b"=").decode()
    stamp = iso1(created)
    return out | {"createdAt": stamp, "updatedAt": stamp}
