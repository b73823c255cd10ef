"""The embedded wallets' state (credentials, sessions, challenges) and the signed-retry
protocol that guards their writes; the package's docstring tells the rules."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np
import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from ...crypto import (
    CURVE,
    GOOGLE,
    SANDBOX_AUDIENCE,
    b64,
    derive_key,
    hpke_seal,
    point,
    point_bytes,
    read_stamp,
    request_body_hash,
)
from ...errors import ServiceError, signature_refused, unauthorized
from ...generate.entities import NO_ROW, Entities, uuid_text
from ..entities import SANDBOX_DOMAIN, EntityViews, iso1

SESSION_LIFETIME_US = 12 * 3600 * 1_000_000

CHALLENGE_TTL_US = 5 * 60 * 1_000_000

OTP_TTL_US = 5 * 60 * 1_000_000

REISSUE_US = 30 * 1_000_000

OTP_CODE = "000000"

OTP_INFO, EXPORT_INFO, SESSION_KEY_INFO = (
    b"OTP_BUNDLE_V1",
    b"EXPORT_BUNDLE_V1",
    b"SESSION_KEY_BUNDLE_V1",
)

_PASSKEY_NAMES = ("iPhone", "MacBook Pro", "YubiKey 5C", "Pixel 8", "Windows Hello")


@dataclass
class Session:
    id: str
    account: int
    credential: dict[str, Any]
    created: int
    expires: int
    public_key: bytes | None = None  # uncompressed point; None for sessions of other devices

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
class Pending:
    """An issued signed-retry challenge, by `requestId`."""

    request_id: str
    operation: str
    body_hash: str
    payload: str
    parameters: dict[str, Any]
    expires: int
    processing: int = 0
    used: bool = False


@dataclass
class PasskeyPending:
    """A passkey login challenge: the key the session will hold and the WebAuthn challenge."""

    credential_id: str
    client_public_key: str
    challenge: str
    expires: int
    used: bool = False


@dataclass
class OtpIssue:
    target: ec.EllipticCurvePrivateKey
    expires: int


@dataclass(frozen=True)
class SignedRequest:
    """What a signed write sent: its operation (method, path template, target), body and
    headers (any case), at the sandbox clock's `now`."""

    operation: str
    body: Any
    headers: Mapping[str, str]
    now: int

    def header(self, name: str) -> str | None:
        for key, value in self.headers.items():
            if key.lower() == name:
                return value
        return None


@dataclass
class WalletState:
    """What the wallets hold, and the signed retry every write goes through."""

    credentials: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    sessions: dict[int, list[Session]] = field(default_factory=dict)
    challenges: dict[str, Pending] = field(default_factory=dict)
    passkey_challenges: dict[str, PasskeyPending] = field(default_factory=dict)
    otp_issues: dict[str, OtpIssue] = field(default_factory=dict)
    last_issue: dict[str, int] = field(default_factory=dict)
    passkey_keys: dict[str, ec.EllipticCurvePublicKey] = field(default_factory=dict)
    oidc_identities: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    owners: dict[int, int] = field(default_factory=dict)  # wallet account -> customer row
    emails: dict[int, str] = field(default_factory=dict)  # customer row -> email
    email_updates: dict[int, int] = field(default_factory=dict)  # customer row -> updated at
    account_ids: dict[int, str] = field(default_factory=dict)
    #: Share of signed retries answered PROCESSING first (one or two re-sends).
    processing_rate: float = 0.25
    forced_processing: dict[int, int] = field(default_factory=dict)
    seed: int = 0
    rng: random.Random = field(default_factory=random.Random)
    organization_id: str = "Organization:00000000-0000-4000-8000-000000000000"

    @classmethod
    def generate(cls, ents: Entities, views: EntityViews, seed: int, now: int) -> Self:
        a = ents.accounts
        wallets = np.flatnonzero(~a.external & (a.kind == 2) & (a.owner != NO_ROW))
        auth = cls(seed=seed, rng=random.Random(f"wallet-calls-{seed}"))
        auth.organization_id = f"Organization:{new_uuid(random.Random(f'org-{seed}'))}"
        r = random.Random(seed)
        for row in wallets.tolist():
            owner = int(a.owner[row])
            email = auth.emails.setdefault(
                owner, f"{views.customer_handle(owner)}@{SANDBOX_DOMAIN}"
            )
            auth.owners[row] = owner
            auth.account_ids[row] = a.ids[row]
            created = int(a.created[row])
            auth.add_credential(row, new_credential(r, a.ids[row], "EMAIL_OTP", email, created))
            if r.random() < 0.3:
                auth.add_credential(
                    row, new_credential(r, a.ids[row], "PASSKEY", r.choice(_PASSKEY_NAMES), created)
                )
            if r.random() < 0.15:
                auth.add_credential(row, new_credential(r, a.ids[row], "OAUTH", email, created))
            for _ in range(r.randrange(0, 3)):
                opened = now - r.randrange(0, SESSION_LIFETIME_US - 3_600_000_000) // 1000 * 1000
                cred = r.choice(auth.credentials[row])
                auth.add_session(
                    Session(
                        f"Session:{new_uuid(r)}", row, cred, opened, opened + SESSION_LIFETIME_US
                    )
                )
        return auth

    # --- state ----------------------------------------------------------------------------

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

    def force_processing(self, account_id: str, rounds: int) -> None:
        """The next challenge issued for this account answers PROCESSING `rounds` times."""
        account = next(row for row, aid in self.account_ids.items() if aid == account_id)
        self.forced_processing[account] = rounds

    def oidc_claims(self, credential_id: str) -> dict[str, str]:
        """`iss`, `aud`, `sub` (and `email`) an OIDC token must carry for an OAUTH credential."""
        cred = self.credential(credential_id)[1]
        iss, aud, sub = self._identity(cred)
        return {"iss": iss, "aud": aud, "sub": sub, "email": cred["nickname"]}

    def credential(self, credential_id: str) -> tuple[int, dict[str, Any]]:
        for account, creds in self.credentials.items():
            for cred in creds:
                if cred["id"] == credential_id:
                    return account, cred
        raise ServiceError(404, "REFERENCE_NOT_FOUND", f"no credential {credential_id}")

    def session(self, session_id: str, now: int) -> Session:
        for sessions in self.sessions.values():
            for s in sessions:
                if s.id == session_id and s.expires > now:
                    return s
        raise ServiceError(404, "REFERENCE_NOT_FOUND", f"no active session {session_id}")

    def customer_view(self, customer: dict[str, Any], row: int) -> dict[str, Any]:
        """A customer as rendered, with its email as last updated here."""
        if row in self.email_updates:
            customer = customer | {
                "email": self.emails[row],
                "updatedAt": iso1(self.email_updates[row]),
            }
        return customer

    def _identity(self, cred: dict[str, Any]) -> tuple[str, str, str]:
        found = self.oidc_identities.get(cred["id"])
        if found is None:
            sub = str(int(hashlib.sha256(cred["id"].encode()).hexdigest()[:16], 16))
            found = (GOOGLE, SANDBOX_AUDIENCE, sub)
        return found

    def _active(self, account: int, now: int) -> list[Session]:
        return [s for s in self.sessions.get(account, []) if s.expires > now]

    def _signing_sessions(self, accounts: list[int], key: bytes, now: int) -> list[Session]:
        return [s for a in accounts for s in self._active(a, now) if s.public_key == key]

    def _new_session(
        self, account: int, cred: dict[str, Any], client_public_key: str, now: int
    ) -> dict[str, Any]:
        """Open a session; a legacy (uncompressed) client key gets a sealed sandbox-made key."""
        target = point(client_public_key)
        sealed = None
        if client_public_key.startswith("04"):
            private = derive_key(self.rng)
            plaintext = f"{private.private_numbers().private_value:064x}".encode()
            sealed = hpke_seal(target, plaintext, SESSION_KEY_INFO)
            key = point_bytes(private.public_key())
        else:
            key = point_bytes(target)
        session = Session(
            f"Session:{new_uuid(self.rng)}", account, cred, now, now + SESSION_LIFETIME_US, key
        )
        self.add_session(session)
        out = session.wire()
        if sealed is not None:
            out["encryptedSessionSigningKey"] = sealed
        return out

    # --- the signed retry -----------------------------------------------------------------

    def signed(
        self,
        req: SignedRequest,
        *,
        account: int,
        kind: str | None,
        activity: str,
        parameters: dict[str, Any],
        authorise: Callable[[bytes], str | None],
        perform: Callable[[Pending], tuple[int, Any]],
    ) -> tuple[int, Any]:
        """Answer one leg of a signed write: issue the challenge (202), or check the signed
        retry and answer PROCESSING or `perform`'s terminal answer. `authorise(key)` gives the
        reason a verified key may not sign this operation, or None."""
        stamp, request_id = req.header("service-wallet-signature"), req.header("request-id")
        if stamp is None and request_id is None:
            return 202, self._issue(req, account, kind, activity, parameters)
        if stamp is None:
            raise unauthorized(
                "WALLET_SIGNATURE_MISSING",
                "Request-Id was sent without Service-Wallet-Signature: stamp the payloadToSign",
            )
        if request_id is None:
            raise unauthorized(
                "REQUEST_ID_MISSING",
                "Service-Wallet-Signature needs the Request-Id of the challenge it answers",
            )
        key, signature = read_stamp(stamp)
        pending = self.challenges.get(request_id)
        if pending is None:
            raise signature_refused("REQUEST_ID_UNKNOWN", f"no challenge {request_id} was issued")
        if pending.used:
            raise signature_refused("REQUEST_ID_REUSED", f"{request_id} was already used")
        if req.now >= pending.expires:
            raise signature_refused(
                "REQUEST_ID_EXPIRED", f"{request_id} expired at {iso1(pending.expires)}"
            )
        if pending.operation != req.operation or pending.body_hash != request_body_hash(req.body):
            raise unauthorized(
                "WALLET_SIGNATURE_BODY_MISMATCH",
                f"the signed retry is not the request {request_id} was issued for",
            )
        try:
            ec.EllipticCurvePublicKey.from_encoded_point(CURVE, key).verify(
                signature, pending.payload.encode(), ec.ECDSA(hashes.SHA256())
            )
        except InvalidSignature:
            raise unauthorized(
                "WALLET_SIGNATURE_INVALID",
                "the signature does not verify over payloadToSign with the stamp's key",
                "SIGNATURE_MISMATCH",
            ) from None
        refusal = authorise(key)
        if refusal is not None:
            raise unauthorized(
                "WALLET_SIGNATURE_INVALID", "the stamp's key may not authorise this", refusal
            )
        if pending.processing > 0:
            pending.processing -= 1
            return 200, {
                "status": "PROCESSING",
                "message": "the operation is settling; re-send the same signed request",
            }
        pending.used = True
        return perform(pending)

    def _issue(
        self,
        req: SignedRequest,
        account: int,
        kind: str | None,
        activity: str,
        parameters: dict[str, Any],
    ) -> dict[str, Any]:
        request_id = f"Request:{new_uuid(self.rng)}"
        body_hash = request_body_hash(req.body)
        request_hash = hashlib.sha256(f"{req.operation}\n{body_hash}".encode()).hexdigest()
        payload = orjson.dumps(
            {
                "organizationId": self.organization_id,
                "parameters": parameters | {"requestHash": request_hash},
                "timestampMs": str(req.now // 1000),
                "type": activity,
            },
            option=orjson.OPT_SORT_KEYS,
        ).decode()
        rounds = self.forced_processing.pop(account, None)
        if rounds is None:
            rounds = self.rng.randint(1, 2) if self.rng.random() < self.processing_rate else 0
        expires = req.now + CHALLENGE_TTL_US
        self.challenges[request_id] = Pending(
            request_id, req.operation, body_hash, payload, parameters, expires, rounds
        )
        out = {"payloadToSign": payload, "requestId": request_id, "expiresAt": iso1(expires)}
        return ({"type": kind} if kind else {}) | out

    def _session_of(self, account: int, now: int) -> Callable[[bytes], str | None]:
        def authorise(key: bytes) -> str | None:
            if self._signing_sessions([account], key, now):
                return None
            return "KEY_NOT_AN_ACTIVE_SESSION"

        return authorise


def new_uuid(r: random.Random) -> str:
    value = r.getrandbits(128)
    value = (value & ~(0xF << 76)) | (0x4 << 76)
    value = (value & ~(0x3 << 62)) | (0x2 << 62)
    return uuid_text(value >> 64, value & (2**64 - 1))


def new_credential(
    r: random.Random, account_id: str, kind: str, nickname: str, created: int
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f"AuthMethod:{new_uuid(r)}",
        "accountId": account_id,
        "type": kind,
        "nickname": nickname,
    }
    if kind == "PASSKEY":
        out["credentialId"] = b64(r.randbytes(32))
    stamp = iso1(created)
    return out | {"createdAt": stamp, "updatedAt": stamp}


def phone_of(account: int) -> str:
    return f"+1415555{account % 10_000:04d}"
