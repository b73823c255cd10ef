"""The `X-Service-Signature` check: a base64 P-256 ECDSA signature over the SHA-256 of the raw
body, verified with the public keys the platform was given (several: a rotation overlaps).

The interface (`WebhookSignature`) says: decode the base64 signature, hash the body with SHA-256,
verify with the public key. It does not name the signature's encoding; what ECDSA libraries emit
and take by default is the ASN.1 DER `SEQUENCE {r, s}` (OpenSSL, Go's `VerifyASN1`, Node's
`crypto.verify`, Java's `SHA256withECDSA`), so DER is what is read. The fixed-width `r || s` form
(64 bytes, IEEE P1363, WebCrypto's) names the same two numbers and is read too: accepting it
verifies nothing weaker, and a platform's signer in a browser-style library emits that.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from paylens.errors import InvalidArgumentError

#: The header the service signs its webhooks in.
SIGNATURE_HEADER = "X-Service-Signature"

_ECDSA_SHA256 = ec.ECDSA(hashes.SHA256())
#: A base64 P-256 signature is at most ~100 characters (DER of two 256-bit numbers: 72 bytes).
_MAX_HEADER = 200


def load_public_keys(keys: Iterable[str | bytes | Path]) -> list[ec.EllipticCurvePublicKey]:
    """P-256 public keys from PEM texts (or files holding them); anything else is refused
    naming which one (its position), never its content."""
    loaded: list[ec.EllipticCurvePublicKey] = []
    for position, key in enumerate(keys, 1):
        if isinstance(key, Path):
            try:
                pem = key.read_bytes()
            except OSError as exc:
                raise InvalidArgumentError(
                    "public_keys", f"key {position}: cannot read {key}: {exc.strerror or exc}"
                ) from None
        else:
            pem = key.encode() if isinstance(key, str) else key
        try:
            public = serialization.load_pem_public_key(pem)
        except (ValueError, TypeError):
            raise InvalidArgumentError(
                "public_keys", f"key {position} is not a PEM public key"
            ) from None
        if not isinstance(public, ec.EllipticCurvePublicKey) or public.curve.name != "secp256r1":
            raise InvalidArgumentError(
                "public_keys", f"key {position} is not a P-256 (secp256r1) public key"
            )
        loaded.append(public)
    if not loaded:
        raise InvalidArgumentError("public_keys", "give at least one PEM public key")
    return loaded


def _signatures_der(header: str) -> list[bytes]:
    """The DER signatures a header may carry: itself, and its 64 bytes read as r || s (a DER
    signature may be 64 bytes long too, so both are tried); none when it is no base64."""
    if len(header) > _MAX_HEADER:
        return []
    try:
        raw = base64.b64decode(header.strip(), validate=True)
    except (binascii.Error, ValueError):
        return []
    if len(raw) != 64:
        return [raw]
    return [raw, encode_dss_signature(int.from_bytes(raw[:32]), int.from_bytes(raw[32:]))]


class Verifier:
    """Checks bodies against any of `public_keys` (PEM texts, bytes or files)."""

    def __init__(self, public_keys: Sequence[str | bytes | Path]) -> None:
        self._keys = load_public_keys(public_keys)

    def __repr__(self) -> str:
        return f"Verifier({len(self._keys)} public key(s))"

    def verify(self, body: bytes, header: str | None) -> bool:
        """Whether `header` (the `X-Service-Signature` value) signs exactly `body` with one of
        the keys; a missing, malformed or wrong-key signature is False."""
        if not header:
            return False
        for signature in _signatures_der(header):
            for key in self._keys:
                try:
                    key.verify(signature, body, _ECDSA_SHA256)
                except InvalidSignature:
                    continue
                return True
        return False
