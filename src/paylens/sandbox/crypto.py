"""The embedded wallets' cryptography, apart from their protocol (`world.wallets`): P-256 keys
and request stamps, HPKE (RFC 9180) bundles, OIDC token checks and WebAuthn (CBOR attestations,
assertions). The wire format is the one `paylens.client._signing` speaks.

- HPKE is RFC 9180 base mode, DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, empty AAD;
  bundles are JSON `{encappedPublic, ciphertext}` in hex.
- A stamp is base64url JSON `{publicKey, scheme, signature}` (see `read_stamp`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import random
from collections.abc import Mapping
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from .errors import invalid, signature_refused, unauthorized
from .world.entities import SANDBOX_DOMAIN

OIDC_MAX_AGE_S = 60

SCHEME = "SIGNATURE_SCHEME_TK_API_P256"

GOOGLE = "https://accounts.google.com"

OIDC_ISSUERS = frozenset({GOOGLE, "https://appleid.apple.com", f"https://login.{SANDBOX_DOMAIN}"})

SANDBOX_AUDIENCE = "paylens-sandbox"

CURVE = ec.SECP256R1()


# --- keys and stamps ------------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def request_body_hash(body: Any) -> str:
    raw = b"" if body is None else orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(raw).hexdigest()


def derive_key(r: random.Random) -> ec.EllipticCurvePrivateKey:
    return ec.derive_private_key(r.getrandbits(250) + 1, CURVE)


def point_bytes(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )


def point_or_none(hex_text: str) -> ec.EllipticCurvePublicKey | None:
    try:
        return ec.EllipticCurvePublicKey.from_encoded_point(CURVE, bytes.fromhex(hex_text))
    except (TypeError, ValueError):
        return None


def is_p256_point(hex_text: str) -> bool:
    """Whether hex text is a P-256 public key (compressed or not)."""
    return point_or_none(hex_text) is not None


def point(hex_text: str) -> ec.EllipticCurvePublicKey:
    key = point_or_none(hex_text)
    assert key is not None, "checked by the route"
    return key


def read_stamp(stamp: str) -> tuple[bytes, bytes]:
    """(uncompressed public key, DER signature) of a stamp, or 401 WALLET_SIGNATURE_MALFORMED."""
    try:
        document = orjson.loads(unb64(stamp.strip()))
        key = point_or_none(document["publicKey"])
        signature = bytes.fromhex(document["signature"])
        decode_dss_signature(signature)
        if document["scheme"] != SCHEME or key is None:
            raise ValueError(document["scheme"])
    except (binascii.Error, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise unauthorized(
            "WALLET_SIGNATURE_MALFORMED",
            f"Service-Wallet-Signature must be base64url JSON {{publicKey, scheme: {SCHEME}, "
            "signature (DER hex)}",
        ) from None
    return point_bytes(key), signature


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


def hpke_seal(recipient: ec.EllipticCurvePublicKey, plaintext: bytes, info: bytes) -> str:
    """`plaintext` sealed to `recipient`, as the JSON bundle {encappedPublic, ciphertext}."""
    ephemeral = ec.generate_private_key(CURVE)
    enc = point_bytes(ephemeral.public_key())
    key, nonce = _hpke_context(
        ephemeral.exchange(ec.ECDH(), recipient), enc, point_bytes(recipient), info
    )
    sealed = AESGCM(key).encrypt(nonce, plaintext, b"")
    return orjson.dumps({"encappedPublic": enc.hex(), "ciphertext": sealed.hex()}).decode()


def hpke_open_json(
    private: ec.EllipticCurvePrivateKey, bundle: str, info: bytes, field_name: str
) -> dict[str, Any]:
    """The JSON object sealed in a bundle to `private` (400 if unreadable, 401 if it does
    not open: it was sealed to another target)."""
    try:
        outer = orjson.loads(bundle)
        enc, sealed = bytes.fromhex(outer["encappedPublic"]), bytes.fromhex(outer["ciphertext"])
        ephemeral = ec.EllipticCurvePublicKey.from_encoded_point(CURVE, enc)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise invalid(
            [{"field": field_name, "message": "must be JSON {encappedPublic, ciphertext} in hex"}]
        ) from None
    key, nonce = _hpke_context(
        private.exchange(ec.ECDH(), ephemeral), enc, point_bytes(private.public_key()), info
    )
    try:
        plaintext = AESGCM(key).decrypt(nonce, sealed, b"")
    except InvalidTag:
        raise signature_refused(
            "OTP_INVALID", f"{field_name} does not decrypt: encrypt it to the latest target"
        ) from None
    try:
        value = orjson.loads(plaintext)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise invalid([{"field": field_name, "message": "must hold a JSON object"}])
    return value


# --- OIDC -------------------------------------------------------------------------------------


def audiences(claims: dict[str, Any]) -> list[str]:
    aud = claims.get("aud")
    return [aud] if isinstance(aud, str) else [a for a in aud or [] if isinstance(a, str)]


def audience(claims: dict[str, Any]) -> str:
    return audiences(claims)[0]


def checked_oidc_claims(token: str, now: int) -> dict[str, Any]:
    """The claims of an OIDC token after the sandbox's checks (form, issuer, freshness)."""
    try:
        claims = orjson.loads(unb64(token.split(".")[1]))
        ok = (
            isinstance(claims, dict)
            and claims.get("iss") in OIDC_ISSUERS
            and isinstance(claims.get("sub"), str)
            and audiences(claims)
            and isinstance(claims.get("iat"), int)
        )
    except (IndexError, binascii.Error, ValueError, orjson.JSONDecodeError):
        ok = False
    if not ok:
        raise invalid(
            [
                {
                    "field": "oidcToken",
                    "message": "must be an OIDC token (JWT) of a supported issuer with iss, "
                    "sub, aud and iat",
                }
            ]
        )
    if abs(now // 1_000_000 - claims["iat"]) > OIDC_MAX_AGE_S:
        raise signature_refused("OIDC_TOKEN_STALE", "the token's iat must be at most 60 s old")
    return dict(claims)


def oidc_token(claims: Mapping[str, Any]) -> str:
    """An unsigned OIDC token (`alg: none`) carrying `claims`: the sandbox checks identity,
    freshness and nonce, never the provider's signature (spec §5.8)."""

    def part(value: Any) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(dict(claims))}."


# --- WebAuthn (passkeys) ----------------------------------------------------------------------


def cbor_item(data: bytes, at: int = 0) -> tuple[Any, int]:
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
            item, at = cbor_item(data, at)
            items.append(item)
        return items, at
    if major == 5:
        mapping = {}
        for _ in range(value):
            key, at = cbor_item(data, at)
            mapping[key], at = cbor_item(data, at)
        return mapping, at
    if major == 7:
        return {20: False, 21: True, 22: None}.get(value), at
    raise ValueError(f"CBOR major type {major} is not used by authenticators")


def client_data_bytes(encoded: str, kind: str, challenge: str) -> bytes | None:
    """The client data bytes when they are of `kind` for `challenge`, else None."""
    raw = unb64(encoded)
    data = orjson.loads(raw)
    return raw if data.get("type") == kind and data.get("challenge") == challenge else None


def attested_key(attestation: dict[str, Any], challenge: str) -> tuple[str, Any]:
    """(credentialId, public key) of a `none` attestation made for `challenge`, or 400."""
    try:
        if client_data_bytes(attestation["clientDataJson"], "webauthn.create", challenge) is None:
            raise ValueError("clientDataJson is not a webauthn.create for this challenge")
        statement, _ = cbor_item(unb64(attestation["attestationObject"]))
        auth = statement["authData"]
        length = int.from_bytes(auth[53:55], "big")
        credential_id = auth[55 : 55 + length]
        cose, _ = cbor_item(auth, 55 + length)
        if b64(credential_id) != attestation["credentialId"].rstrip("="):
            raise ValueError("credentialId differs from the attested one")
        if cose[1] != 2 or cose[3] != -7 or cose[-1] != 1:
            raise ValueError("the key must be ES256 on P-256")
        key = ec.EllipticCurvePublicKey.from_encoded_point(CURVE, b"\x04" + cose[-2] + cose[-3])
    except (KeyError, IndexError, TypeError, ValueError, binascii.Error) as exc:
        raise invalid(
            [{"field": "attestation", "message": f"is not a passkey attestation: {exc}"}]
        ) from None
    return attestation["credentialId"], key


def assertion_verifies(
    key: ec.EllipticCurvePublicKey, assertion: dict[str, Any], challenge: str
) -> bool:
    try:
        client_data = client_data_bytes(assertion["clientDataJson"], "webauthn.get", challenge)
        auth = unb64(assertion["authenticatorData"])
        if client_data is None or len(auth) < 37 or not auth[32] & 0x01:
            return False
        signed = auth + hashlib.sha256(client_data).digest()
        key.verify(unb64(assertion["signature"]), signed, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, KeyError, TypeError, ValueError, binascii.Error):
        return False
    return True
