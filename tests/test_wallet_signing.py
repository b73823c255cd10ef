"""Client-side wallet crypto: session keys, stamps checked by an independent ECDSA verification
(raw `cryptography` calls on the decoded stamp, not paylens code), HPKE checked against
`cryptography`'s own RFC 9180 implementation, and secrets kept out of reprs, logs and pickles."""

from __future__ import annotations

import base64
import hashlib
import json
import pickle

import orjson
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from paylens import InvalidArgumentError, SessionKey
from paylens.client._signing import (
    EXPORT_INFO,
    OTP_INFO,
    encrypt_otp_attempt,
    hpke_open,
    hpke_seal,
)


def decode_stamp(stamp: str) -> dict[str, str]:
    """The stamp's JSON, decoded by hand (base64url without padding)."""
    return json.loads(base64.urlsafe_b64decode(stamp + "=" * (-len(stamp) % 4)))


def verify_independently(stamp: str, payload: str) -> None:
    """Raise InvalidSignature unless the stamp's DER signature verifies over the payload bytes
    with the stamp's own public key: plain `cryptography` calls, no paylens code."""
    document = decode_stamp(stamp)
    assert document["scheme"] == "SIGNATURE_SCHEME_TK_API_P256"
    key = ec.EllipticCurvePublicKey.from_encoded_point(
        ec.SECP256R1(), bytes.fromhex(document["publicKey"])
    )
    key.verify(bytes.fromhex(document["signature"]), payload.encode(), ec.ECDSA(hashes.SHA256()))


PAYLOAD = '{"organizationId":"org_1","parameters":{"x":"é"},"timestampMs":"1","type":"T"}'


def test_a_stamp_verifies_with_an_independent_ecdsa_check() -> None:
    key = SessionKey.generate()
    stamp = key.stamp(PAYLOAD)
    assert "=" not in stamp
    assert list(decode_stamp(stamp)) == ["publicKey", "scheme", "signature"]
    assert decode_stamp(stamp)["publicKey"] == key.public_key_hex
    verify_independently(stamp, PAYLOAD)
    with pytest.raises(InvalidSignature):
        verify_independently(stamp, PAYLOAD.replace("é", "e"))
    assert key(PAYLOAD) != stamp  # ECDSA is randomised; both verify
    verify_independently(key(PAYLOAD), PAYLOAD)


def test_the_public_key_is_the_compressed_point_of_the_private_scalar() -> None:
    scalar = "1f" * 32
    key = SessionKey.from_private_hex(scalar)
    expected = ec.derive_private_key(int(scalar, 16), ec.SECP256R1()).public_key()
    compressed = expected.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint
    )
    assert key.public_key_hex == compressed.hex()
    assert len(key.public_key_hex) == 66 and key.public_key_hex[:2] in ("02", "03")
    assert key.public_key_uncompressed_hex[:2] == "04"
    assert key.export_private_hex() == scalar
    assert key == SessionKey.from_private_hex(scalar)
    assert key.oidc_nonce == hashlib.sha256(key.public_key_hex.encode()).hexdigest()


@pytest.mark.parametrize("bad", ["", "zz" * 32, "00" * 32, "ff" * 32, "1f" * 31])
def test_a_bad_private_scalar_is_refused_without_echoing_it(bad: str) -> None:
    with pytest.raises(InvalidArgumentError) as error:
        SessionKey.from_private_hex(bad)
    assert bad not in str(error.value) or not bad


def test_the_private_key_never_shows(caplog: pytest.LogCaptureFixture) -> None:
    key = SessionKey.generate()
    secret = key.export_private_hex()
    for text in (repr(key), str(key), f"{key}", repr([key]), repr({"k": key})):
        assert secret not in text
        assert key.public_key_hex in text
    with pytest.raises(TypeError):
        pickle.dumps(key)
    with pytest.raises(AttributeError):
        key.__dict__  # noqa: B018  (slots only: no stray attribute carries it)
    assert secret not in caplog.text


def test_hpke_interoperates_with_an_independent_rfc9180_implementation() -> None:
    hpke = pytest.importorskip("cryptography.hazmat.primitives.hpke")
    suite = hpke.Suite(hpke.KEM.P256, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)
    recipient = ec.generate_private_key(ec.SECP256R1())
    enc, ciphertext = hpke_seal(recipient.public_key(), b"sealed by paylens", OTP_INFO)
    assert len(enc) == 65 and enc[0] == 4
    assert suite.decrypt(enc + ciphertext, recipient, info=OTP_INFO) == b"sealed by paylens"
    blob = suite.encrypt(b"sealed by cryptography", recipient.public_key(), info=EXPORT_INFO)
    assert hpke_open(recipient, blob[:65], blob[65:], EXPORT_INFO) == b"sealed by cryptography"
    with pytest.raises(InvalidArgumentError):
        hpke_open(recipient, blob[:65], blob[65:], OTP_INFO)  # another info: another key


def _target_bundle(target: ec.EllipticCurvePrivateKey, *, tamper: bool = False) -> str:
    enclave = ec.generate_private_key(ec.SECP256R1())
    point = serialization.PublicFormat.UncompressedPoint
    data = orjson.dumps(
        {"targetPublic": target.public_key().public_bytes(serialization.Encoding.X962, point).hex()}
    )
    signature = enclave.sign(data, ec.ECDSA(hashes.SHA256()))
    return json.dumps(
        {
            "version": "v1.0.0",
            "data": (data.replace(b"0", b"1", 1) if tamper else data).hex(),
            "dataSignature": signature.hex(),
            "enclaveQuorumPublic": enclave.public_key()
            .public_bytes(serialization.Encoding.X962, point)
            .hex(),
        }
    )


def test_the_otp_attempt_is_sealed_to_the_bundle_target() -> None:
    hpke = pytest.importorskip("cryptography.hazmat.primitives.hpke")
    suite = hpke.Suite(hpke.KEM.P256, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)
    target = ec.generate_private_key(ec.SECP256R1())
    key = SessionKey.generate()
    bundle = json.loads(encrypt_otp_attempt(_target_bundle(target), "000000", key))
    assert set(bundle) == {"encappedPublic", "ciphertext"}
    sealed = bytes.fromhex(bundle["encappedPublic"]) + bytes.fromhex(bundle["ciphertext"])
    attempt = json.loads(suite.decrypt(sealed, target, info=OTP_INFO))
    assert attempt == {"otp_code": "000000", "public_key": key.public_key_hex}
    with pytest.raises(InvalidArgumentError, match="altered"):
        encrypt_otp_attempt(_target_bundle(target, tamper=True), "000000", key)
    with pytest.raises(InvalidArgumentError, match="otpEncryptionTargetBundle"):
        encrypt_otp_attempt("not json", "000000", key)


def test_open_bundle_reads_an_export_and_names_a_wrong_key() -> None:
    key = SessionKey.generate()
    hpke = pytest.importorskip("cryptography.hazmat.primitives.hpke")
    suite = hpke.Suite(hpke.KEM.P256, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)
    recipient = ec.EllipticCurvePublicKey.from_encoded_point(
        ec.SECP256R1(), bytes.fromhex(key.public_key_hex)
    )
    blob = suite.encrypt(b"twelve words", recipient, info=EXPORT_INFO)
    bundle = json.dumps({"encappedPublic": blob[:65].hex(), "ciphertext": blob[65:].hex()})
    assert key.open_bundle(bundle) == b"twelve words"
    with pytest.raises(InvalidArgumentError, match="does not decrypt"):
        SessionKey.generate().open_bundle(bundle)
    with pytest.raises(InvalidArgumentError, match="encappedPublic"):
        key.open_bundle("{}")
