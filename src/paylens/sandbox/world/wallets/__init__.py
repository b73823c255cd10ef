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

from .credentials import CredentialOps
from .sessions import SessionOps
from .state import Session, SignedRequest, WalletState

__all__ = ["Session", "SignedRequest", "WalletAuth", "WalletState"]


class WalletAuth(CredentialOps, SessionOps):
    """The embedded wallets: their state and the signed retry (`WalletState`), credentials
    (`CredentialOps`) and sessions (`SessionOps`)."""
