"""Wallet sessions and what they sign: revoke and refresh a session, export a wallet's
mnemonic, update a customer's email."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

from ...crypto import hpke_seal, point
from ...errors import ServiceError, invalid, signature_refused
from ..entities import iso1
from .state import EXPORT_INFO, Pending, SignedRequest, WalletState

_WORDS = [
    "amber",
    "anchor",
    "arctic",
    "badge",
    "canyon",
    "cedar",
    "cobalt",
    "delta",
    "ember",
    "fable",
    "garnet",
    "harbor",
    "ivory",
    "jasper",
    "kelp",
    "lagoon",
    "maple",
    "nectar",
    "onyx",
    "orchid",
    "pepper",
    "quartz",
    "raven",
    "saffron",
    "tundra",
    "umber",
    "velvet",
    "willow",
]

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class SessionOps(WalletState):
    """The session operations of `WalletAuth`."""

    def revoke_session_signed(self, req: SignedRequest, session_id: str) -> tuple[int, Any]:
        session = self.session(session_id, req.now)

        def perform(_: Pending) -> tuple[int, Any]:
            self.revoke_session(session_id)
            return 204, None

        return self.signed(
            req,
            account=session.account,
            kind=session.credential["type"],
            activity="ACTIVITY_TYPE_DELETE_SESSIONS",
            parameters={"sessionId": session_id},
            authorise=self._session_of(session.account, req.now),
            perform=perform,
        )

    def refresh(
        self, req: SignedRequest, session_id: str, client_public_key: str
    ) -> tuple[int, Any]:
        session = next((s for ss in self.sessions.values() for s in ss if s.id == session_id), None)
        if session is None:
            raise ServiceError(404, "REFERENCE_NOT_FOUND", f"no session {session_id}")
        if session.expires <= req.now:
            raise signature_refused("SESSION_EXPIRED", "the session expired: log in again instead")

        def authorise(key: bytes) -> str | None:
            return None if key == session.public_key else "NOT_THE_REFRESHED_SESSION"

        def perform(_: Pending) -> tuple[int, Any]:
            self.revoke_session(session_id)
            return 201, self._new_session(
                session.account, session.credential, client_public_key, req.now
            )

        return self.signed(
            req,
            account=session.account,
            kind=session.credential["type"],
            activity="ACTIVITY_TYPE_CREATE_READ_WRITE_SESSION",
            parameters={"sessionId": session_id, "targetPublicKey": client_public_key},
            authorise=authorise,
            perform=perform,
        )

    def export(self, req: SignedRequest, account: int, client_public_key: str) -> tuple[int, Any]:
        account_id = self.account_ids[account]

        def perform(_: Pending) -> tuple[int, Any]:
            words = random.Random(f"mnemonic-{self.seed}-{account}").choices(_WORDS, k=12)
            sealed = hpke_seal(point(client_public_key), " ".join(words).encode(), EXPORT_INFO)
            return 200, {"id": account_id, "encryptedWalletCredentials": sealed}

        return self.signed(
            req,
            account=account,
            kind=None,
            activity="ACTIVITY_TYPE_EXPORT_WALLET",
            parameters={"accountId": account_id, "targetPublicKey": client_public_key},
            authorise=self._session_of(account, req.now),
            perform=perform,
        )

    def _tied(self, customer: int) -> list[tuple[int, dict[str, Any]]]:
        return [
            (account, cred)
            for account, owner in sorted(self.owners.items())
            if owner == customer
            for cred in self.credentials.get(account, [])
            if cred["type"] == "EMAIL_OTP"
        ]

    def update_email(
        self,
        req: SignedRequest,
        customer: int,
        email: str,
        render: Callable[[], dict[str, Any]],
    ) -> tuple[int, Any]:
        """PATCH /customers/{id} with a new email; `render()` is the customer as stored."""
        if not _EMAIL.match(email):
            raise invalid([{"field": "email", "message": "must be an email address"}])
        tied = self._tied(customer)
        mine = {cred["id"] for _, cred in tied}
        taken = any(
            c["type"] == "EMAIL_OTP" and c["nickname"] == email and c["id"] not in mine
            for creds in self.credentials.values()
            for c in creds
        )
        if taken:
            raise ServiceError(
                409, "EMAIL_OTP_EMAIL_ALREADY_EXISTS", f"{email} already belongs to a credential"
            )

        def perform(pending: Pending | None = None) -> tuple[int, Any]:
            now_tied = [cred["id"] for _, cred in self._tied(customer)]
            if pending is not None and pending.parameters["credentialIds"] != now_tied:
                raise ServiceError(
                    409,
                    "EMAIL_OTP_CREDENTIAL_SET_CHANGED",
                    "the customer's EMAIL_OTP credentials changed since the challenge: start over",
                )
            updated = iso1(req.now)
            for _, cred in self._tied(customer):
                cred.update(nickname=email, updatedAt=updated)
            self.emails[customer] = email
            self.email_updates[customer] = req.now
            return 200, self.customer_view(render(), customer)

        signing = req.header("service-wallet-signature") or req.header("request-id")
        if not tied and not signing:
            return perform()
        accounts = sorted(a for a, owner in self.owners.items() if owner == customer)

        def authorise(key: bytes) -> str | None:
            if self._signing_sessions(accounts, key, req.now):
                return None
            return "KEY_NOT_A_SESSION_OF_THE_CUSTOMERS_WALLETS"

        return self.signed(
            req,
            account=accounts[0],
            kind=None,
            activity="ACTIVITY_TYPE_UPDATE_USER_EMAIL",
            parameters={"userEmail": email, "credentialIds": [cred["id"] for _, cred in tied]},
            authorise=authorise,
            perform=perform,
        )
