"""Wallet credentials: add and revoke one, issue its challenge (OTP or passkey), verify it
(OTP, OAuth, passkey) to open a session."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
from typing import Any

import orjson
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from ...crypto import (
    assertion_verifies,
    attested_key,
    audience,
    audiences,
    checked_oidc_claims,
    derive_key,
    hpke_open_json,
    point,
    point_bytes,
    point_or_none,
)
from ...errors import ServiceError, invalid, signature_refused, unauthorized
from ..entities import iso1
from .state import (
    CHALLENGE_TTL_US,
    OTP_CODE,
    OTP_INFO,
    OTP_TTL_US,
    REISSUE_US,
    OtpIssue,
    PasskeyPending,
    Pending,
    SignedRequest,
    WalletState,
    new_uuid,
    phone_of,
)


class CredentialOps(WalletState):
    """The credential operations of `WalletAuth`."""

    def add(
        self, req: SignedRequest, account: int, kind: str, fields: dict[str, Any]
    ) -> tuple[int, Any]:
        """POST /auth/credentials after the route checked the body's shape."""
        creds = self.credentials.get(account, [])
        account_id = self.account_ids[account]
        extra: dict[str, Any] = {}
        if kind in ("EMAIL_OTP", "SMS_OTP"):
            if any(c["type"] == kind for c in creds):
                raise ServiceError(
                    400,
                    f"{kind}_CREDENTIAL_ALREADY_EXISTS",
                    f"the account already has its {kind} credential; revoke it first",
                )
            nickname = (
                self.emails[self.owners[account]] if kind == "EMAIL_OTP" else phone_of(account)
            )
        elif kind == "OAUTH":
            claims = checked_oidc_claims(fields["oidcToken"], req.now)
            identity = (claims["iss"], audience(claims), claims["sub"])
            if any(c["type"] == "OAUTH" and self._identity(c) == identity for c in creds):
                raise invalid(
                    [{"field": "oidcToken", "message": "this identity is already a credential"}]
                )
            nickname = str(claims.get("email") or claims["sub"])
        else:
            credential_id, public_key = attested_key(fields["attestation"], fields["challenge"])
            if any(c.get("credentialId") == credential_id for c in creds):
                raise ServiceError(
                    400,
                    "PASSKEY_CREDENTIAL_ALREADY_EXISTS",
                    "this passkey (credentialId) is already registered on the account",
                )
            nickname, extra = fields["nickname"], {"credentialId": credential_id}

        def perform(_: Pending | None = None) -> tuple[int, Any]:
            created = iso1(req.now)
            cred = {
                "id": f"AuthMethod:{new_uuid(self.rng)}",
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
            raise invalid(
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
            raise invalid(
                [{"field": "id", "message": "OAUTH credentials verify with a fresh OIDC token"}],
                "OAUTH credentials have no challenge step",
            )
        if cred["type"] == "PASSKEY" and client_public_key is None:
            raise invalid([{"field": "clientPublicKey", "message": "is required for a PASSKEY"}])
        last = self.last_issue.get(credential_id)
        if last is not None and now - last < REISSUE_US:
            wait = -(-(REISSUE_US - (now - last)) // 1_000_000)
            raise ServiceError(
                429,
                "RATE_LIMITED",
                f"a challenge was issued {(now - last) / 1e6:g}s ago; retry in {wait}s",
                headers={"Retry-After": str(wait)},
            )
        self.last_issue[credential_id] = now
        if cred["type"] != "PASSKEY":
            return dict(cred) | {"otpEncryptionTargetBundle": self._send_otp(cred, now)}
        assert client_public_key is not None
        request_id = f"Request:{new_uuid(self.rng)}"
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
        target = derive_key(self.rng)
        self.otp_issues[cred["id"]] = OtpIssue(target, now + OTP_TTL_US)
        enclave = derive_key(random.Random(f"enclave-{self.seed}"))
        data = orjson.dumps({"targetPublic": point_bytes(target.public_key()).hex()})
        signature = enclave.sign(data, ec.ECDSA(hashes.SHA256()))
        return orjson.dumps(
            {
                "version": "v1.0.0",
                "data": data.hex(),
                "dataSignature": signature.hex(),
                "enclaveQuorumPublic": point_bytes(enclave.public_key()).hex(),
            }
        ).decode()

    def verify_otp(self, req: SignedRequest, credential_id: str, bundle: str) -> tuple[int, Any]:
        account, cred = self.credential(credential_id)
        issue = self.otp_issues.get(credential_id)
        if issue is None:
            raise signature_refused("OTP_NOT_ISSUED", "no OTP is pending: call /challenge first")
        if req.now >= issue.expires:
            raise signature_refused("OTP_EXPIRED", "the OTP expired: call /challenge for a new one")
        attempt = hpke_open_json(issue.target, bundle, OTP_INFO, "encryptedOtpBundle")
        code, public_key = attempt.get("otp_code"), attempt.get("public_key")
        if not isinstance(public_key, str) or point_or_none(public_key) is None:
            raise invalid([{"field": "encryptedOtpBundle", "message": "public_key is not P-256"}])
        if not isinstance(code, str) or not hmac.compare_digest(code, OTP_CODE):
            raise signature_refused("OTP_INVALID", "the OTP code is wrong")
        bound = point_bytes(point(public_key))

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
        claims = checked_oidc_claims(token, now)
        iss, aud, sub = self._identity(cred)
        if claims["iss"] != iss or claims["sub"] != sub or aud not in audiences(claims):
            raise signature_refused(
                "OIDC_IDENTITY_MISMATCH", "the token's iss, aud and sub must match the credential"
            )
        nonce = hashlib.sha256(client_public_key.encode()).hexdigest()
        if claims.get("nonce") != nonce:
            raise signature_refused(
                "OIDC_NONCE_MISMATCH", "nonce must be the SHA-256 of clientPublicKey"
            )
        return self._new_session(account, cred, client_public_key, now)

    def verify_passkey(
        self, credential_id: str, request_id: str | None, assertion: dict[str, Any], now: int
    ) -> dict[str, Any]:
        account, cred = self.credential(credential_id)
        if request_id is None:
            raise unauthorized(
                "REQUEST_ID_MISSING", "echo the requestId of /challenge as Request-Id"
            )
        pending = self.passkey_challenges.get(request_id)
        if pending is None or pending.credential_id != credential_id:
            raise signature_refused(
                "REQUEST_ID_UNKNOWN", f"no passkey challenge {request_id} is pending"
            )
        if pending.used:
            raise signature_refused("REQUEST_ID_REUSED", f"{request_id} was already used")
        if now >= pending.expires:
            raise signature_refused("REQUEST_ID_EXPIRED", f"{request_id} expired")
        key = self.passkey_keys.get(credential_id)
        expected = base64.urlsafe_b64encode(pending.challenge.encode()).rstrip(b"=").decode()
        if (
            key is None
            or assertion["credentialId"] != cred.get("credentialId")
            or not assertion_verifies(key, assertion, expected)
        ):
            raise signature_refused(
                "PASSKEY_ASSERTION_INVALID", "the WebAuthn assertion does not verify"
            )
        pending.used = True
        return self._new_session(account, cred, pending.client_public_key, now)
