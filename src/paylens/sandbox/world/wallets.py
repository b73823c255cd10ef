"""Credentials and sessions of the embedded wallet accounts, and the signed-retry protocol that
guards their writes (spec §4.2, §5, §8).

Every embedded wallet starts with an EMAIL_OTP credential tied to its customer's email; some also
hold a passkey or an OAuth login. Generated sessions were opened shortly before the sandbox
clock's start on other devices (their keys are unknown), and every session lasts 12 hours, so
sessions lapse as the clock moves. Sessions opened through the interface hold the public key
the client signs with.

Decisions where the specification is silent (the client's side is `paylens.client._signing`;
this module shares only the wire format with it):

- Stamp: base64url (padding optional) of JSON `{publicKey, scheme, signature}`: a P-256 public
  key in hex (compressed or not), `SIGNATURE_SCHEME_TK_API_P256`, and the DER ECDSA-SHA256
  signature in hex over the UTF-8 `payloadToSign`. Anything else: WALLET_SIGNATURE_MALFORMED.
- Which key may sign: the key of an active session of the account (credential add, session
  revoke, export); for a credential revoke, a session of another credential; for a session
  refresh, that session; for an OTP verify, the key bound into the OTP bundle; for a customer
  email update, a session of one of the customer's wallets with EMAIL_OTP. A key that does not
  verify the payload, or is not allowed: WALLET_SIGNATURE_INVALID (`details.reason`).
- `payloadToSign` is compact JSON with sorted keys `{organizationId, parameters, timestampMs,
  type}`; `parameters.requestHash` is the SHA-256 of the operation (method, path template and
  target id) and the request body as canonical JSON (sorted keys), so the signed retry must be
  the same request: another body, target or endpoint answers WALLET_SIGNATURE_BODY_MISMATCH.
- Order of checks on a retry: a stamp without Request-Id (REQUEST_ID_MISSING) or the reverse
  (WALLET_SIGNATURE_MISSING); the stamp's form (MALFORMED); the requestId (INVALID_SIGNATURE
  with reason REQUEST_ID_UNKNOWN, REQUEST_ID_REUSED or REQUEST_ID_EXPIRED: valid 5 minutes on
  the sandbox clock, single-use once the operation is answered); the request (BODY_MISMATCH);
  the signature and the key (WALLET_SIGNATURE_INVALID). Then the operation's own rules.
- PROCESSING: a signed retry may answer 200 `{status: PROCESSING}` before its terminal answer,
  `processing_rate` of the time (seeded), for one or two re-sends of the same signed request;
  `force_processing(account_id, rounds)` decides it for the account's next challenge.
- INVALID_SIGNATURE also answers a failed credential proof: an OTP (OTP_INVALID, OTP_EXPIRED,
  OTP_NOT_ISSUED), an OIDC token (OIDC_TOKEN_STALE: `iat` more than 60 s from the clock,
  OIDC_IDENTITY_MISMATCH, OIDC_NONCE_MISMATCH: `nonce` must be the hex SHA-256 of the
  `clientPublicKey` text) or a passkey assertion (PASSKEY_ASSERTION_INVALID); and a refresh of an
  expired session (SESSION_EXPIRED).
- HPKE is RFC 9180 base mode, DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, empty AAD;
  bundles are JSON `{encappedPublic, ciphertext}` in hex; `info` is OTP_BUNDLE_V1,
  EXPORT_BUNDLE_V1 or SESSION_KEY_BUNDLE_V1. `otpEncryptionTargetBundle` is JSON `{version,
  data: hex of JSON {targetPublic}, dataSignature, enclaveQuorumPublic}`, a fresh target per
  OTP sent; the OTP attempt is JSON `{otp_code, public_key}`; the code is always 000000 and
  stays valid 5 minutes. Challenges (OTP or passkey) re-issued within 30 s answer 429
  RATE_LIMITED with `Retry-After`.
- Passkeys: `clientDataJson` is base64url of the client data JSON (`webauthn.create` whose
  `challenge` equals the registration `challenge`; `webauthn.get` whose `challenge` is base64url
  of the UTF-8 hex challenge); `attestationObject` is CBOR with `fmt: none` and `authData`
  carrying the credential id and its ES256 COSE key; an assertion signs `authenticatorData ||
  SHA-256(clientDataJSON)` with that key. The relying-party id is not checked.
- A compressed `clientPublicKey` keeps the session key on the client; an uncompressed one (the
  deprecated flow) makes the sandbox create the key and return its private scalar as hex sealed
  to that key (`encryptedSessionSigningKey`, info SESSION_KEY_BUNDLE_V1).
- A refresh ends the refreshed session. An OAUTH credential's identity is (`iss`, `aud`,
  `sub`); generated ones use Google's issuer, audience `paylens-sandbox` and a `sub` drawn from
  their id (`oidc_claims`). `oidc_token` mints the unsigned token the sandbox accepts.
- Customer email update: only `{customerType, email}` bodies are served (other fields: 501);
  with EMAIL_OTP credentials on the customer's wallets it is a signed retry, and the tied set
  is bound at the challenge (EMAIL_OTP_CREDENTIAL_SET_CHANGED if it moved).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from ..errors import ServiceError, invalid
from ..generate.entities import NO_ROW, Entities, uuid_text
from .entities import SANDBOX_DOMAIN, EntityViews, iso1

SESSION_LIFETIME_US = 12 * 3600 * 1_000_000
CHALLENGE_TTL_US = 5 * 60 * 1_000_000
OTP_TTL_US = 5 * 60 * 1_000_000
REISSUE_US = 30 * 1_000_000
OIDC_MAX_AGE_S = 60
OTP_CODE = "000000"
SCHEME = "SIGNATURE_SCHEME_TK_API_P256"
GOOGLE = "https://accounts.google.com"
OIDC_ISSUERS = frozenset({GOOGLE, "https://appleid.apple.com", f"https://login.{SANDBOX_DOMAIN}"})
SANDBOX_AUDIENCE = "paylens-sandbox"
OTP_INFO, EXPORT_INFO, SESSION_KEY_INFO = (
    b"OTP_BUNDLE_V1",
    b"EXPORT_BUNDLE_V1",
    b"SESSION_KEY_BUNDLE_V1",
)
_PASSKEY_NAMES = ("iPhone", "MacBook Pro", "YubiKey 5C", "Pixel 8", "Windows Hello")
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
_CURVE = ec.SECP256R1()
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


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


def _error(
    status: int,
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Exception:
    return ServiceError(status, code, message, details, headers)


def _invalid(errors: list[dict[str, str]], message: str = "invalid parameters") -> Exception:
    return invalid(errors, message)


def _unauthorized(code: str, message: str, reason: str | None = None) -> Exception:
    return _error(401, code, message, {"reason": reason} if reason else None)


def _refused(reason: str, message: str) -> Exception:
    return _unauthorized("INVALID_SIGNATURE", message, reason)


@dataclass
class WalletAuth:
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
    def generate(cls, ents: Entities, views: EntityViews, seed: int, now: int) -> WalletAuth:
        a = ents.accounts
        wallets = np.flatnonzero(~a.external & (a.kind == 2) & (a.owner != NO_ROW))
        auth = cls(seed=seed, rng=random.Random(f"wallet-calls-{seed}"))
        auth.organization_id = f"Organization:{_uuid(random.Random(f'org-{seed}'))}"
        r = random.Random(seed)
        for row in wallets.tolist():
            owner = int(a.owner[row])
            email = auth.emails.setdefault(
                owner, f"{views.customer_handle(owner)}@{SANDBOX_DOMAIN}"
            )
            auth.owners[row] = owner
            auth.account_ids[row] = a.ids[row]
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

    # --- state ------------------------------------------------------------------------------

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
        raise _error(404, "REFERENCE_NOT_FOUND", f"no credential {credential_id}")

    def session(self, session_id: str, now: int) -> Session:
        for sessions in self.sessions.values():
            for s in sessions:
                if s.id == session_id and s.expires > now:
                    return s
        raise _error(404, "REFERENCE_NOT_FOUND", f"no active session {session_id}")

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
        target = _point(client_public_key)
        sealed = None
        if client_public_key.startswith("04"):
            private = _derive_key(self.rng)
            plaintext = f"{private.private_numbers().private_value:064x}".encode()
            sealed = _bundle(target, plaintext, SESSION_KEY_INFO)
            key = _bytes(private.public_key())
        else:
            key = _bytes(target)
        session = Session(
            f"Session:{_uuid(self.rng)}", account, cred, now, now + SESSION_LIFETIME_US, key
        )
        self.add_session(session)
        out = session.wire()
        if sealed is not None:
            out["encryptedSessionSigningKey"] = sealed
        return out

    # --- the signed retry -------------------------------------------------------------------

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
            raise _unauthorized(
                "WALLET_SIGNATURE_MISSING",
                "Request-Id was sent without Service-Wallet-Signature: stamp the payloadToSign",
            )
        if request_id is None:
            raise _unauthorized(
                "REQUEST_ID_MISSING",
                "Service-Wallet-Signature needs the Request-Id of the challenge it answers",
            )
        key, signature = _read_stamp(stamp)
        pending = self.challenges.get(request_id)
        if pending is None:
            raise _refused("REQUEST_ID_UNKNOWN", f"no challenge {request_id} was issued")
        if pending.used:
            raise _refused("REQUEST_ID_REUSED", f"{request_id} was already used")
        if req.now >= pending.expires:
            raise _refused("REQUEST_ID_EXPIRED", f"{request_id} expired at {iso1(pending.expires)}")
        if pending.operation != req.operation or pending.body_hash != _body_hash(req.body):
            raise _unauthorized(
                "WALLET_SIGNATURE_BODY_MISMATCH",
                f"the signed retry is not the request {request_id} was issued for",
            )
        try:
            ec.EllipticCurvePublicKey.from_encoded_point(_CURVE, key).verify(
                signature, pending.payload.encode(), ec.ECDSA(hashes.SHA256())
            )
        except InvalidSignature:
            raise _unauthorized(
                "WALLET_SIGNATURE_INVALID",
                "the signature does not verify over payloadToSign with the stamp's key",
                "SIGNATURE_MISMATCH",
            ) from None
        refusal = authorise(key)
        if refusal is not None:
            raise _unauthorized(
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
        request_id = f"Request:{_uuid(self.rng)}"
        body_hash = _body_hash(req.body)
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

    # --- credentials ------------------------------------------------------------------------

    def add(
        self, req: SignedRequest, account: int, kind: str, fields: dict[str, Any]
    ) -> tuple[int, Any]:
        """POST /auth/credentials after the route checked the body's shape."""
        creds = self.credentials.get(account, [])
        account_id = self.account_ids[account]
        extra: dict[str, Any] = {}
        if kind in ("EMAIL_OTP", "SMS_OTP"):
            if any(c["type"] == kind for c in creds):
                raise _error(
                    400,
                    f"{kind}_CREDENTIAL_ALREADY_EXISTS",
                    f"the account already has its {kind} credential; revoke it first",
                )
            nickname = self.emails[self.owners[account]] if kind == "EMAIL_OTP" else _phone(account)
        elif kind == "OAUTH":
            claims = _oidc(fields["oidcToken"], req.now)
            identity = (claims["iss"], _audience(claims), claims["sub"])
            if any(c["type"] == "OAUTH" and self._identity(c) == identity for c in creds):
                raise _invalid(
                    [{"field": "oidcToken", "message": "this identity is already a credential"}]
                )
            nickname = str(claims.get("email") or claims["sub"])
        else:
            credential_id, public_key = _attestation(fields["attestation"], fields["challenge"])
            if any(c.get("credentialId") == credential_id for c in creds):
                raise _error(
                    400,
                    "PASSKEY_CREDENTIAL_ALREADY_EXISTS",
                    "this passkey (credentialId) is already registered on the account",
                )
            nickname, extra = fields["nickname"], {"credentialId": credential_id}

        def perform(_: Pending | None = None) -> tuple[int, Any]:
            created = iso1(req.now)
            cred = {
                "id": f"AuthMethod:{_uuid(self.rng)}",
                "accountId": account_id,
                "type": kind,
                "nickname": nickname,
                **extra,
                "createdAt": created,
                "updatedAt": created,
            }
            self.add_credential(account, cred)
            if kind == "OAUTH":
                self.oidc_identities[cred["id"]] = identity
            elif kind == "PASSKEY":
                self.passkey_keys[cred["id"]] = public_key
            else:
                return 201, cred | {"otpEncryptionTargetBundle": self._send_otp(cred, req.now)}
            return 201, dict(cred)

        if not creds:
            return perform()
        activity = {
            "EMAIL_OTP": "ACTIVITY_TYPE_UPDATE_USER_EMAIL",
            "SMS_OTP": "ACTIVITY_TYPE_UPDATE_USER_PHONE_NUMBER",
            "OAUTH": "ACTIVITY_TYPE_CREATE_OAUTH_PROVIDERS",
            "PASSKEY": "ACTIVITY_TYPE_CREATE_AUTHENTICATORS",
        }[kind]
        return self.signed(
            req,
            account=account,
            kind=kind,
            activity=activity,
            parameters={"accountId": account_id, "credentialType": kind},
            authorise=self._session_of(account, req.now),
            perform=perform,
        )

    def revoke(self, req: SignedRequest, credential_id: str) -> tuple[int, Any]:
        """DELETE /auth/credentials/{id}: signed by a session of another credential."""
        account, cred = self.credential(credential_id)
        if len(self.credentials[account]) < 2:
            raise _invalid(
                [{"field": "id", "message": "the account's last credential cannot be revoked"}],
                "at least one credential must remain",
            )

        def authorise(key: bytes) -> str | None:
            signing = self._signing_sessions([account], key, req.now)
            if not signing:
                return "KEY_NOT_AN_ACTIVE_SESSION"
            if all(s.credential["id"] == credential_id for s in signing):
                return "SESSION_OF_THE_REVOKED_CREDENTIAL"
            return None

        def perform(_: Pending) -> tuple[int, Any]:
            self.credentials[account].remove(cred)
            self.sessions[account] = [
                s for s in self.sessions.get(account, []) if s.credential["id"] != credential_id
            ]
            self.otp_issues.pop(credential_id, None)
            return 204, None

        return self.signed(
            req,
            account=account,
            kind=cred["type"],
            activity="ACTIVITY_TYPE_DELETE_AUTHENTICATORS",
            parameters={"accountId": cred["accountId"], "credentialId": credential_id},
            authorise=authorise,
            perform=perform,
        )

    def challenge(self, credential_id: str, client_public_key: str | None, now: int) -> Any:
        """POST /auth/credentials/{id}/challenge."""
        _, cred = self.credential(credential_id)
        if cred["type"] == "OAUTH":
            raise _invalid(
                [{"field": "id", "message": "OAUTH credentials verify with a fresh OIDC token"}],
                "OAUTH credentials have no challenge step",
            )
        if cred["type"] == "PASSKEY" and client_public_key is None:
            raise _invalid([{"field": "clientPublicKey", "message": "is required for a PASSKEY"}])
        last = self.last_issue.get(credential_id)
        if last is not None and now - last < REISSUE_US:
            wait = -(-(REISSUE_US - (now - last)) // 1_000_000)
            raise _error(
                429,
                "RATE_LIMITED",
                f"a challenge was issued {(now - last) / 1e6:g}s ago; retry in {wait}s",
                headers={"Retry-After": str(wait)},
            )
        self.last_issue[credential_id] = now
        if cred["type"] != "PASSKEY":
            return dict(cred) | {"otpEncryptionTargetBundle": self._send_otp(cred, now)}
        assert client_public_key is not None
        request_id = f"Request:{_uuid(self.rng)}"
        session_body = orjson.dumps(
            {
                "organizationId": self.organization_id,
                "parameters": {"credentialId": credential_id, "publicKey": client_public_key},
                "timestampMs": str(now // 1000),
                "type": "ACTIVITY_TYPE_CREATE_READ_WRITE_SESSION",
            },
            option=orjson.OPT_SORT_KEYS,
        )
        challenge = hashlib.sha256(session_body).hexdigest()
        expires = now + CHALLENGE_TTL_US
        self.passkey_challenges[request_id] = PasskeyPending(
            credential_id, client_public_key, challenge, expires
        )
        return dict(cred) | {
            "challenge": challenge,
            "requestId": request_id,
            "expiresAt": iso1(expires),
        }

    def _send_otp(self, cred: dict[str, Any], now: int) -> str:
        """'Send' an OTP (always 000000) and return the target bundle to encrypt it to."""
        target = _derive_key(self.rng)
        self.otp_issues[cred["id"]] = OtpIssue(target, now + OTP_TTL_US)
        enclave = _derive_key(random.Random(f"enclave-{self.seed}"))
        data = orjson.dumps({"targetPublic": _bytes(target.public_key()).hex()})
        signature = enclave.sign(data, ec.ECDSA(hashes.SHA256()))
        return orjson.dumps(
            {
                "version": "v1.0.0",
                "data": data.hex(),
                "dataSignature": signature.hex(),
                "enclaveQuorumPublic": _bytes(enclave.public_key()).hex(),
            }
        ).decode()

    # --- verify -----------------------------------------------------------------------------

    def verify_otp(self, req: SignedRequest, credential_id: str, bundle: str) -> tuple[int, Any]:
        account, cred = self.credential(credential_id)
        issue = self.otp_issues.get(credential_id)
        if issue is None:
            raise _refused("OTP_NOT_ISSUED", "no OTP is pending: call /challenge first")
        if req.now >= issue.expires:
            raise _refused("OTP_EXPIRED", "the OTP expired: call /challenge for a new one")
        attempt = _open_json(issue.target, bundle, OTP_INFO, "encryptedOtpBundle")
        code, public_key = attempt.get("otp_code"), attempt.get("public_key")
        if not isinstance(public_key, str) or _point_or_none(public_key) is None:
            raise _invalid([{"field": "encryptedOtpBundle", "message": "public_key is not P-256"}])
        if not isinstance(code, str) or not hmac.compare_digest(code, OTP_CODE):
            raise _refused("OTP_INVALID", "the OTP code is wrong")
        bound = _bytes(_point(public_key))

        def authorise(key: bytes) -> str | None:
            return None if key == bound else "KEY_NOT_BOUND_TO_THE_OTP_BUNDLE"

        def perform(_: Pending) -> tuple[int, Any]:
            self.otp_issues.pop(credential_id, None)
            return 200, self._new_session(account, cred, public_key, req.now)

        return self.signed(
            req,
            account=account,
            kind=cred["type"],
            activity="ACTIVITY_TYPE_OTP_LOGIN",
            parameters={"credentialId": credential_id, "publicKey": public_key},
            authorise=authorise,
            perform=perform,
        )

    def verify_oauth(
        self, credential_id: str, token: str, client_public_key: str, now: int
    ) -> dict[str, Any]:
        account, cred = self.credential(credential_id)
        claims = _oidc(token, now)
        iss, aud, sub = self._identity(cred)
        if claims["iss"] != iss or claims["sub"] != sub or aud not in _audiences(claims):
            raise _refused(
                "OIDC_IDENTITY_MISMATCH", "the token's iss, aud and sub must match the credential"
            )
        nonce = hashlib.sha256(client_public_key.encode()).hexdigest()
        if claims.get("nonce") != nonce:
            raise _refused("OIDC_NONCE_MISMATCH", "nonce must be the SHA-256 of clientPublicKey")
        return self._new_session(account, cred, client_public_key, now)

    def verify_passkey(
        self, credential_id: str, request_id: str | None, assertion: dict[str, Any], now: int
    ) -> dict[str, Any]:
        account, cred = self.credential(credential_id)
        if request_id is None:
            raise _unauthorized(
                "REQUEST_ID_MISSING", "echo the requestId of /challenge as Request-Id"
            )
        pending = self.passkey_challenges.get(request_id)
        if pending is None or pending.credential_id != credential_id:
            raise _refused("REQUEST_ID_UNKNOWN", f"no passkey challenge {request_id} is pending")
        if pending.used:
            raise _refused("REQUEST_ID_REUSED", f"{request_id} was already used")
        if now >= pending.expires:
            raise _refused("REQUEST_ID_EXPIRED", f"{request_id} expired")
        key = self.passkey_keys.get(credential_id)
        expected = base64.urlsafe_b64encode(pending.challenge.encode()).rstrip(b"=").decode()
        if (
            key is None
            or assertion["credentialId"] != cred.get("credentialId")
            or not _assertion_verifies(key, assertion, expected)
        ):
            raise _refused("PASSKEY_ASSERTION_INVALID", "the WebAuthn assertion does not verify")
        pending.used = True
        return self._new_session(account, cred, pending.client_public_key, now)

    # --- sessions and export ----------------------------------------------------------------

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

    def refresh(self, req: SignedRequest, session_id: str, client_public_key: str) -> Any:
        session = next((s for ss in self.sessions.values() for s in ss if s.id == session_id), None)
        if session is None:
            raise _error(404, "REFERENCE_NOT_FOUND", f"no session {session_id}")
        if session.expires <= req.now:
            raise _refused("SESSION_EXPIRED", "the session expired: log in again instead")

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

    def export(self, req: SignedRequest, account: int, client_public_key: str) -> Any:
        account_id = self.account_ids[account]

        def perform(_: Pending) -> tuple[int, Any]:
            words = random.Random(f"mnemonic-{self.seed}-{account}").choices(_WORDS, k=12)
            sealed = _bundle(_point(client_public_key), " ".join(words).encode(), EXPORT_INFO)
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

    # --- customer email ---------------------------------------------------------------------

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
            raise _invalid([{"field": "email", "message": "must be an email address"}])
        tied = self._tied(customer)
        mine = {cred["id"] for _, cred in tied}
        taken = any(
            c["type"] == "EMAIL_OTP" and c["nickname"] == email and c["id"] not in mine
            for creds in self.credentials.values()
            for c in creds
        )
        if taken:
            raise _error(
                409, "EMAIL_OTP_EMAIL_ALREADY_EXISTS", f"{email} already belongs to a credential"
            )

        def perform(pending: Pending | None = None) -> tuple[int, Any]:
            now_tied = [cred["id"] for _, cred in self._tied(customer)]
            if pending is not None and pending.parameters["credentialIds"] != now_tied:
                raise _error(
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


def oidc_token(claims: Mapping[str, Any]) -> str:
    """An unsigned OIDC token (`alg: none`) carrying `claims`: the sandbox checks identity,
    freshness and nonce, never the provider's signature (spec §5.8)."""

    def part(value: Any) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(dict(claims))}."


# --- helpers ----------------------------------------------------------------------------------


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
        out["credentialId"] = _b64(r.randbytes(32))
    stamp = iso1(created)
    return out | {"createdAt": stamp, "updatedAt": stamp}


def _phone(account: int) -> str:
    return f"+1415555{account % 10_000:04d}"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _body_hash(body: Any) -> str:
    raw = b"" if body is None else orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(raw).hexdigest()


def _derive_key(r: random.Random) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(r.getrandbits(250) + 1, _CURVE)


def _bytes(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )


def _point_or_none(hex_text: str) -> ec.EllipticCurvePublicKey | None:
    try:
        return ec.EllipticCurvePublicKey.from_encoded_point(_CURVE, bytes.fromhex(hex_text))
    except (TypeError, ValueError):
        return None


def is_p256_point(hex_text: str) -> bool:
    """Whether hex text is a P-256 public key (compressed or not)."""
    return _point_or_none(hex_text) is not None


def _point(hex_text: str) -> ec.EllipticCurvePublicKey:
    key = _point_or_none(hex_text)
    assert key is not None, "checked by the route"
    return key


def _read_stamp(stamp: str) -> tuple[bytes, bytes]:
    """(uncompressed public key, DER signature) of a stamp, or 401 WALLET_SIGNATURE_MALFORMED."""
    try:
        document = orjson.loads(_unb64(stamp.strip()))
        key = _point_or_none(document["publicKey"])
        signature = bytes.fromhex(document["signature"])
        decode_dss_signature(signature)
        if document["scheme"] != SCHEME or key is None:
            raise ValueError(document["scheme"])
    except (binascii.Error, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise _unauthorized(
            "WALLET_SIGNATURE_MALFORMED",
            f"Service-Wallet-Signature must be base64url JSON {{publicKey, scheme: {SCHEME}, "
            "signature (DER hex)}",
        ) from None
    return _bytes(key), signature


# --- HPKE (RFC 9180) base mode: DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM -------------


def _hkdf_label(suite: bytes, label: bytes, data: bytes) -> bytes:
    return b"HPKE-v1" + suite + label + data


def _hpke_context(dh: bytes, enc: bytes, recipient: bytes, info: bytes) -> tuple[bytes, bytes]:
    """The AEAD key and nonce of a base-mode context from the KEM's Diffie-Hellman value."""
    kem, hpke = b"KEM\x00\x10", b"HPKE\x00\x10\x00\x01\x00\x01"

    def extract(suite: bytes, salt: bytes, label: bytes, ikm: bytes) -> bytes:
        return hmac.new(salt or bytes(32), _hkdf_label(suite, label, ikm), "sha256").digest()

    def expand(suite: bytes, prk: bytes, label: bytes, context: bytes, n: int) -> bytes:
        labeled = n.to_bytes(2, "big") + _hkdf_label(suite, label, context)
        return HKDFExpand(hashes.SHA256(), n, labeled).derive(prk)

    shared = expand(kem, extract(kem, b"", b"eae_prk", dh), b"shared_secret", enc + recipient, 32)
    context = (
        b"\x00" + extract(hpke, b"", b"psk_id_hash", b"") + extract(hpke, b"", b"info_hash", info)
    )
    secret = extract(hpke, shared, b"secret", b"")
    return expand(hpke, secret, b"key", context, 16), expand(
        hpke, secret, b"base_nonce", context, 12
    )


def _bundle(recipient: ec.EllipticCurvePublicKey, plaintext: bytes, info: bytes) -> str:
    """`plaintext` sealed to `recipient`, as the JSON bundle {encappedPublic, ciphertext}."""
    ephemeral = ec.generate_private_key(_CURVE)
    enc = _bytes(ephemeral.public_key())
    key, nonce = _hpke_context(
        ephemeral.exchange(ec.ECDH(), recipient), enc, _bytes(recipient), info
    )
    sealed = AESGCM(key).encrypt(nonce, plaintext, b"")
    return orjson.dumps({"encappedPublic": enc.hex(), "ciphertext": sealed.hex()}).decode()


def _open_json(
    private: ec.EllipticCurvePrivateKey, bundle: str, info: bytes, field_name: str
) -> dict[str, Any]:
    """The JSON object sealed in a bundle to `private` (400 if unreadable, 401 if it does
    not open: it was sealed to another target)."""
    try:
        outer = orjson.loads(bundle)
        enc, sealed = bytes.fromhex(outer["encappedPublic"]), bytes.fromhex(outer["ciphertext"])
        ephemeral = ec.EllipticCurvePublicKey.from_encoded_point(_CURVE, enc)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise _invalid(
            [{"field": field_name, "message": "must be JSON {encappedPublic, ciphertext} in hex"}]
        ) from None
    key, nonce = _hpke_context(
        private.exchange(ec.ECDH(), ephemeral), enc, _bytes(private.public_key()), info
    )
    try:
        plaintext = AESGCM(key).decrypt(nonce, sealed, b"")
    except InvalidTag:
        raise _refused(
            "OTP_INVALID", f"{field_name} does not decrypt: encrypt it to the latest target"
        ) from None
    try:
        value = orjson.loads(plaintext)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise _invalid([{"field": field_name, "message": "must hold a JSON object"}])
    return value


# --- OIDC -------------------------------------------------------------------------------------


def _audiences(claims: dict[str, Any]) -> list[str]:
    aud = claims.get("aud")
    return [aud] if isinstance(aud, str) else [a for a in aud or [] if isinstance(a, str)]


def _audience(claims: dict[str, Any]) -> str:
    return _audiences(claims)[0]


def _oidc(token: str, now: int) -> dict[str, Any]:
    """The claims of an OIDC token after the sandbox's checks (form, issuer, freshness)."""
    try:
        claims = orjson.loads(_unb64(token.split(".")[1]))
        ok = (
            isinstance(claims, dict)
            and claims.get("iss") in OIDC_ISSUERS
            and isinstance(claims.get("sub"), str)
            and _audiences(claims)
            and isinstance(claims.get("iat"), int)
        )
    except (IndexError, binascii.Error, ValueError, orjson.JSONDecodeError):
        ok = False
    if not ok:
        raise _invalid(
            [
                {
                    "field": "oidcToken",
                    "message": "must be an OIDC token (JWT) of a supported issuer with iss, "
                    "sub, aud and iat",
                }
            ]
        )
    if abs(now // 1_000_000 - claims["iat"]) > OIDC_MAX_AGE_S:
        raise _refused("OIDC_TOKEN_STALE", "the token's iat must be at most 60 s old")
    return dict(claims)


# --- WebAuthn (passkeys) ----------------------------------------------------------------------


def _cbor(data: bytes, at: int = 0) -> tuple[Any, int]:
    """One CBOR item (unsigned and negative ints, byte and text strings, arrays, maps, simple
    values) starting at `at`, and the offset after it: what a `none` attestation holds."""
    major, info = data[at] >> 5, data[at] & 0x1F
    at += 1
    if info < 24:
        value = info
    elif info in (24, 25, 26, 27):
        size = 1 << (info - 24)
        value, at = int.from_bytes(data[at : at + size], "big"), at + size
    else:
        raise ValueError("indefinite lengths are not used by authenticators")
    if major == 0:
        return value, at
    if major == 1:
        return -1 - value, at
    if major in (2, 3):
        chunk = data[at : at + value]
        return (chunk if major == 2 else chunk.decode()), at + value
    if major == 4:
        items = []
        for _ in range(value):
            item, at = _cbor(data, at)
            items.append(item)
        return items, at
    if major == 5:
        mapping = {}
        for _ in range(value):
            key, at = _cbor(data, at)
            mapping[key], at = _cbor(data, at)
        return mapping, at
    if major == 7:
        return {20: False, 21: True, 22: None}.get(value), at
    raise ValueError(f"CBOR major type {major} is not used by authenticators")


def _client_data(encoded: str, kind: str, challenge: str) -> bytes | None:
    """The client data bytes when they are of `kind` for `challenge`, else None."""
    raw = _unb64(encoded)
    data = orjson.loads(raw)
    return raw if data.get("type") == kind and data.get("challenge") == challenge else None


def _attestation(attestation: dict[str, Any], challenge: str) -> tuple[str, Any]:
    """(credentialId, public key) of a `none` attestation made for `challenge`, or 400."""
    try:
        if _client_data(attestation["clientDataJson"], "webauthn.create", challenge) is None:
            raise ValueError("clientDataJson is not a webauthn.create for this challenge")
        statement, _ = _cbor(_unb64(attestation["attestationObject"]))
        auth = statement["authData"]
        length = int.from_bytes(auth[53:55], "big")
        credential_id = auth[55 : 55 + length]
        cose, _ = _cbor(auth, 55 + length)
        if _b64(credential_id) != attestation["credentialId"].rstrip("="):
            raise ValueError("credentialId differs from the attested one")
        if cose[1] != 2 or cose[3] != -7 or cose[-1] != 1:
            raise ValueError("the key must be ES256 on P-256")
        key = ec.EllipticCurvePublicKey.from_encoded_point(_CURVE, b"\x04" + cose[-2] + cose[-3])
    except (KeyError, IndexError, TypeError, ValueError, binascii.Error) as exc:
        raise _invalid(
            [{"field": "attestation", "message": f"is not a passkey attestation: {exc}"}]
        ) from None
    return attestation["credentialId"], key


def _assertion_verifies(
    key: ec.EllipticCurvePublicKey, assertion: dict[str, Any], challenge: str
) -> bool:
    try:
        client_data = _client_data(assertion["clientDataJson"], "webauthn.get", challenge)
        auth = _unb64(assertion["authenticatorData"])
        if client_data is None or len(auth) < 37 or not auth[32] & 0x01:
            return False
        signed = auth + hashlib.sha256(client_data).digest()
        key.verify(_unb64(assertion["signature"]), signed, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, KeyError, TypeError, ValueError, binascii.Error):
        return False
    return True
