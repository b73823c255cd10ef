"""Client-side wallet crypto and the signed-retry protocol (spec §5.4, §5.5).

`SessionKey` holds a P-256 key pair in this process. Its private half never leaves it: no repr,
str, pickle or log shows it; `export_private_hex()` is the one explicit way out.

Stamp (`Service-Wallet-Signature`): base64url, without padding, of the compact JSON
`{"publicKey": <compressed SEC1 point, hex>, "scheme": "SIGNATURE_SCHEME_TK_API_P256",
"signature": <DER ECDSA-SHA256 signature, hex>}`, signed over the UTF-8 bytes of `payloadToSign`
exactly as received.

HPKE (RFC 9180), base mode, suite DHKEM(P-256, HKDF-SHA256) / HKDF-SHA256 / AES-128-GCM
(KEM 0x0010, KDF 0x0001, AEAD 0x0001), one message per context (sequence 0), empty AAD. An
encrypted bundle is the JSON string `{"encappedPublic": <uncompressed point, hex>,
"ciphertext": <hex>}`. The `info` string separates the uses: `OTP_BUNDLE_V1` (the OTP attempt),
`EXPORT_BUNDLE_V1` (exported wallet credentials), `SESSION_KEY_BUNDLE_V1` (a legacy
`encryptedSessionSigningKey`).

OTP target (`otpEncryptionTargetBundle`): the JSON string `{"version": "v1.0.0", "data": <hex of
the UTF-8 JSON {"targetPublic": <uncompressed point, hex>}>, "dataSignature": <DER ECDSA-SHA256
over the data bytes, hex>, "enclaveQuorumPublic": <uncompressed point, hex>}`. The signature is
checked (it catches a damaged bundle; pin `enclaveQuorumPublic` yourself for authenticity). The
OTP attempt encrypted to `targetPublic` is the JSON `{"otp_code": "...", "public_key":
<compressed session public key, hex>}`.

Flows are generators that yield `Call`s (and `Pause`s) and receive responses, so one flow serves
`Client` and `AsyncClient` (`run_flow`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import inspect
import logging
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar, cast

import httpx
import orjson
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from paylens.errors import (
    InvalidArgumentError,
    InvalidSignatureError,
    PaylensError,
    ResponseValidationError,
    WalletOperationPendingError,
)
from paylens.models import SignedRetryChallenge

from ._policy import Call, public_request, read_answer

__all__ = [
    "SIGNATURE_HEADER",
    "SIGNATURE_SCHEME",
    "Pause",
    "PollPolicy",
    "SessionKey",
    "Signer",
    "encrypt_otp_attempt",
    "hpke_open",
    "hpke_seal",
    "run_flow",
    "signed_flow",
]

logger = logging.getLogger("paylens.client")

T = TypeVar("T")

SIGNATURE_HEADER = "Service-Wallet-Signature"
REQUEST_ID_HEADER = "Request-Id"
SIGNATURE_SCHEME = "SIGNATURE_SCHEME_TK_API_P256"
OTP_INFO = b"OTP_BUNDLE_V1"
EXPORT_INFO = b"EXPORT_BUNDLE_V1"
SESSION_KEY_INFO = b"SESSION_KEY_BUNDLE_V1"

_CURVE = ec.SECP256R1()
_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


class SessionKey:
    """A P-256 session key pair held by this process.

        key = SessionKey.generate()
        key.public_key_hex          # compressed point, hex: the clientPublicKey to send
        key.stamp(payload_to_sign)  # the Service-Wallet-Signature value

    A `SessionKey` is itself a signer (`key(payload) == key.stamp(payload)`), so it can be
    passed as `signer=` to every signed operation.
    """

    __slots__ = ("_private", "public_key_hex")

    def __init__(self, private_key: ec.EllipticCurvePrivateKey) -> None:
        if not isinstance(private_key, ec.EllipticCurvePrivateKey) or not isinstance(
            private_key.curve, ec.SECP256R1
        ):
            raise InvalidArgumentError("private_key", "expected a P-256 (secp256r1) private key")
        self._private = private_key
        self.public_key_hex: str = _point(private_key.public_key(), compressed=True).hex()

    @classmethod
    def generate(cls) -> SessionKey:
        """A fresh key pair from the operating system's random source."""
        return cls(ec.generate_private_key(_CURVE))

    @classmethod
    def from_private_hex(cls, private_hex: str) -> SessionKey:
        """The key pair of a 32-byte private scalar given as 64 hex digits."""
        try:
            scalar = int(private_hex, 16) if len(private_hex) == 64 else 0
        except (TypeError, ValueError):
            scalar = 0
        if not 0 < scalar < _ORDER:
            raise InvalidArgumentError(
                "private_hex", "expected 64 hex digits of a P-256 private scalar"
            )
        return cls(ec.derive_private_key(scalar, _CURVE))

    @classmethod
    def from_encrypted_bundle(cls, bundle: str, target: SessionKey) -> SessionKey:
        """The session key of a legacy `encryptedSessionSigningKey`, sealed to `target` (the
        uncompressed `clientPublicKey` sent to verify): its plaintext is the private scalar."""
        return cls.from_private_hex(target.open_bundle(bundle, info=SESSION_KEY_INFO).decode())

    def export_private_hex(self) -> str:
        """The private scalar as 64 hex digits: the only way it leaves this object. Store it
        as a secret, never in logs or the warehouse."""
        return f"{self._private.private_numbers().private_value:064x}"

    @property
    def public_key_uncompressed_hex(self) -> str:
        return _point(self._private.public_key(), compressed=False).hex()

    @property
    def oidc_nonce(self) -> str:
        """The `nonce` an OIDC token must carry to verify an OAUTH credential with this key:
        the lowercase hex SHA-256 of `public_key_hex` (its UTF-8 text)."""
        return hashlib.sha256(self.public_key_hex.encode()).hexdigest()

    def sign(self, payload: str | bytes) -> bytes:
        """DER ECDSA-SHA256 signature of `payload` (a str is signed as its UTF-8 bytes)."""
        data = payload.encode() if isinstance(payload, str) else payload
        return self._private.sign(data, ec.ECDSA(hashes.SHA256()))

    def stamp(self, payload: str | bytes) -> str:
        """The API-key stamp of `payload` (see the module docstring for its format)."""
        document = {
            "publicKey": self.public_key_hex,
            "scheme": SIGNATURE_SCHEME,
            "signature": self.sign(payload).hex(),
        }
        return base64.urlsafe_b64encode(orjson.dumps(document)).rstrip(b"=").decode()

    __call__ = stamp

    def open_bundle(self, bundle: str, *, info: bytes = EXPORT_INFO) -> bytes:
        """Decrypt an HPKE bundle sealed to this key (e.g. `encryptedWalletCredentials`)."""
        enc, ciphertext = _read_bundle(bundle)
        return hpke_open(self._private, enc, ciphertext, info)

    def __repr__(self) -> str:
        return f"SessionKey(public_key_hex={self.public_key_hex!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionKey) and other.public_key_hex == self.public_key_hex

    def __hash__(self) -> int:
        return hash(self.public_key_hex)

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a SessionKey is not serialised implicitly; use export_private_hex() on purpose"
        )


#: What signs a signed retry: a `SessionKey`, or any callable `payloadToSign -> stamp`.
Signer = SessionKey | Callable[[str], str]


def _point(key: ec.EllipticCurvePublicKey, *, compressed: bool) -> bytes:
    form = (
        serialization.PublicFormat.CompressedPoint
        if compressed
        else serialization.PublicFormat.UncompressedPoint
    )
    return key.public_bytes(serialization.Encoding.X962, form)


def _public_key(hex_text: str, what: str) -> ec.EllipticCurvePublicKey:
    try:
        return ec.EllipticCurvePublicKey.from_encoded_point(_CURVE, bytes.fromhex(hex_text))
    except (TypeError, ValueError):
        raise ResponseValidationError(f"{what} is not a P-256 point in hex") from None


# --- HPKE (RFC 9180), base mode, DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM ------------

_KEM_SUITE = b"KEM\x00\x10"
_HPKE_SUITE = b"HPKE\x00\x10\x00\x01\x00\x01"


def _extract(salt: bytes, ikm: bytes) -> bytes:
    return hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()


def _labeled_extract(suite: bytes, salt: bytes, label: bytes, ikm: bytes) -> bytes:
    return _extract(salt, b"HPKE-v1" + suite + label + ikm)


def _labeled_expand(suite: bytes, prk: bytes, label: bytes, info: bytes, length: int) -> bytes:
    labeled = length.to_bytes(2, "big") + b"HPKE-v1" + suite + label + info
    return HKDFExpand(hashes.SHA256(), length, labeled).derive(prk)


def _shared_secret(dh: bytes, enc: bytes, recipient: bytes) -> bytes:
    prk = _labeled_extract(_KEM_SUITE, b"", b"eae_prk", dh)
    return _labeled_expand(_KEM_SUITE, prk, b"shared_secret", enc + recipient, 32)


def _key_and_nonce(shared_secret: bytes, info: bytes) -> tuple[bytes, bytes]:
    psk_id_hash = _labeled_extract(_HPKE_SUITE, b"", b"psk_id_hash", b"")
    info_hash = _labeled_extract(_HPKE_SUITE, b"", b"info_hash", info)
    context = b"\x00" + psk_id_hash + info_hash
    secret = _labeled_extract(_HPKE_SUITE, shared_secret, b"secret", b"")
    key = _labeled_expand(_HPKE_SUITE, secret, b"key", context, 16)
    nonce = _labeled_expand(_HPKE_SUITE, secret, b"base_nonce", context, 12)
    return key, nonce


def hpke_seal(
    recipient: ec.EllipticCurvePublicKey, plaintext: bytes, info: bytes
) -> tuple[bytes, bytes]:
    """`(enc, ciphertext)`: `plaintext` sealed to `recipient` (single shot, empty AAD)."""
    ephemeral = ec.generate_private_key(_CURVE)
    enc = _point(ephemeral.public_key(), compressed=False)
    dh = ephemeral.exchange(ec.ECDH(), recipient)
    key, nonce = _key_and_nonce(_shared_secret(dh, enc, _point(recipient, compressed=False)), info)
    return enc, AESGCM(key).encrypt(nonce, plaintext, b"")


def hpke_open(
    private: ec.EllipticCurvePrivateKey, enc: bytes, ciphertext: bytes, info: bytes
) -> bytes:
    """The plaintext of `hpke_seal`'s output, or InvalidArgumentError when it does not open."""
    try:
        ephemeral = ec.EllipticCurvePublicKey.from_encoded_point(_CURVE, enc)
        dh = private.exchange(ec.ECDH(), ephemeral)
        mine = _point(private.public_key(), compressed=False)
        key, nonce = _key_and_nonce(_shared_secret(dh, enc, mine), info)
        return AESGCM(key).decrypt(nonce, ciphertext, b"")
    except (ValueError, InvalidTag):
        raise InvalidArgumentError(
            "bundle", "does not decrypt with this key (another key, or a damaged bundle)"
        ) from None


def _read_bundle(bundle: str) -> tuple[bytes, bytes]:
    try:
        document = orjson.loads(bundle)
        return bytes.fromhex(document["encappedPublic"]), bytes.fromhex(document["ciphertext"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise InvalidArgumentError(
            "bundle", "expected the JSON {encappedPublic, ciphertext} with hex values"
        ) from None


def _write_bundle(enc: bytes, ciphertext: bytes) -> str:
    return orjson.dumps({"encappedPublic": enc.hex(), "ciphertext": ciphertext.hex()}).decode()


def otp_target_public_key(target_bundle: str) -> ec.EllipticCurvePublicKey:
    """The `targetPublic` key of an `otpEncryptionTargetBundle`, after checking its signature."""
    try:
        outer = orjson.loads(target_bundle)
        data = bytes.fromhex(outer["data"])
        signature = bytes.fromhex(outer["dataSignature"])
        signer_hex = outer["enclaveQuorumPublic"]
        target_hex = orjson.loads(data)["targetPublic"]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise InvalidArgumentError(
            "target_bundle",
            "is not an otpEncryptionTargetBundle (JSON with data, dataSignature, "
            "enclaveQuorumPublic); pass the string the challenge answered, unchanged",
        ) from None
    try:
        _public_key(signer_hex, "enclaveQuorumPublic").verify(
            signature, data, ec.ECDSA(hashes.SHA256())
        )
    except InvalidSignature:
        raise InvalidArgumentError(
            "target_bundle", "its dataSignature does not verify: the bundle was altered"
        ) from None
    return _public_key(target_hex, "targetPublic")


def encrypt_otp_attempt(target_bundle: str, otp_code: str, key: SessionKey) -> str:
    """The `encryptedOtpBundle` of an OTP attempt: the code and `key`'s public key, sealed to
    the target of `otpEncryptionTargetBundle`."""
    plaintext = orjson.dumps({"otp_code": otp_code, "public_key": key.public_key_hex})
    return _write_bundle(*hpke_seal(otp_target_public_key(target_bundle), plaintext, OTP_INFO))


# --- the signed-retry flow --------------------------------------------------------------------


@dataclass(frozen=True)
class Pause:
    """A flow step: wait this long (the client's own sleep) before the next request."""

    seconds: float


@dataclass(frozen=True)
class PollPolicy:
    """How a flow re-sends a signed request answered 200 PROCESSING (spec §5.5): up to
    `max_polls` times, waiting `first`, then twice as long each time up to `cap` seconds; and
    how often a lapsed challenge may restart the operation from its first request."""

    max_polls: int = 12
    first: float = 0.5
    cap: float = 8.0
    max_restarts: int = 2
    max_legs: int = 4  # challenges (202) answered within one attempt

    def wait(self, poll: int) -> float:
        return min(self.cap, self.first * 2.0 ** (poll - 1))


DEFAULT_POLL = PollPolicy()

Step = Call[httpx.Response] | Pause
Flow = Generator[Step, Any, T]


def _raw(response: httpx.Response) -> httpx.Response:
    return response


def _is_processing(response: httpx.Response, terminal_200: bool) -> bool:
    if response.status_code != 200:
        return False
    if not terminal_200:
        return True  # where success is 201 or 204, a 200 alone means still processing
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return False
    return isinstance(body, dict) and body.get("status") == "PROCESSING"


def _stamped(
    first: Call[httpx.Response], response: httpx.Response, signer: Signer | None
) -> Call[httpx.Response]:
    if signer is None:
        raise InvalidArgumentError(
            "signer",
            f"{first.method} /{first.path} answered a signed-retry challenge (202): pass signer= "
            "(a SessionKey of an active session, or a callable payload -> stamp)",
        )
    try:
        challenge = SignedRetryChallenge.model_validate_json(response.content)
    except ValueError as exc:
        raise ResponseValidationError(
            f"{first.method} /{first.path} answered 202 without a signed-retry challenge: {exc}"
        ) from None
    if not (challenge.request_id.isascii() and challenge.request_id.isprintable()):
        # it goes back as a header, which holds printable ASCII only; nothing was acted on
        raise ResponseValidationError(
            f"{first.method} /{first.path} answered a challenge whose requestId cannot be sent "
            f"back as the {REQUEST_ID_HEADER} header: {challenge.request_id!r}"
        )
    headers = {
        **(first.headers or {}),
        SIGNATURE_HEADER: signer(challenge.payload_to_sign),
        REQUEST_ID_HEADER: challenge.request_id,
    }
    return dataclasses.replace(first, headers=headers)


def signed_flow(
    method: str,
    path: str,
    parse: Callable[[httpx.Response], T],
    *,
    body: Any = None,
    signer: Signer | None = None,
    terminal: frozenset[int] = frozenset({200}),
    headers: Mapping[str, str] | None = None,
    poll: PollPolicy = DEFAULT_POLL,
    restart_when_processing: bool = False,
) -> Flow[T]:
    """One wallet operation under the signed-retry protocol.

    The first request goes without signature headers. A 202 challenge is stamped by `signer`
    over `payloadToSign` exactly as received, and the same request (the same body bytes) is
    re-sent with `Service-Wallet-Signature` and `Request-Id`. A 200 PROCESSING to the signed
    request is re-sent identically with backoff (`poll`); to the unsigned first request it is
    `WalletOperationPendingError` at once (sent again, it would be another operation). A
    challenge that lapsed (401 INVALID_SIGNATURE, reason REQUEST_ID_EXPIRED) restarts the
    operation from its first request, unless the service had already answered PROCESSING: it
    accepted the operation, and a new one could act twice, so any refusal of the re-send is
    `WalletOperationPendingError`, saying to look before trying again (spec §5.5 allows a
    fresh start for an export only: `restart_when_processing`). A status in
    `terminal` is the answer, read by `parse`; an answer `parse` cannot read is an unknown
    outcome (`OutcomeUnknownError`) for an operation that changes state; every error answer
    raises its typed error.
    """
    content = None if body is None else orjson.dumps(body)
    first = Call(method, path, _raw, headers=dict(headers or {}) or None, content=content)
    restarts = 0
    while True:
        request, legs, polls, accepted = first, 0, 0, False
        try:
            while True:
                response = yield request
                if response.status_code == 202:
                    legs += 1
                    if legs > poll.max_legs:
                        raise ResponseValidationError(
                            f"{method} /{path} kept answering new challenges ({legs})"
                        )
                    request, polls = _stamped(first, response, signer), 0
                elif _is_processing(response, 200 in terminal):
                    accepted = True
                    if request is first:
                        # only a signed re-send is the same request (its Request-Id); the first
                        # one sent again would be another operation (an OTP challenge: a new
                        # code sent to the customer)
                        raise WalletOperationPendingError(
                            f"{method} /{path} was accepted and is still PROCESSING; sending it "
                            "again would start another: read its state, or call again later"
                        )
                    polls += 1
                    if polls > poll.max_polls:
                        raise WalletOperationPendingError(
                            f"{method} /{path} still PROCESSING after {poll.max_polls} re-sends; "
                            "the service keeps reconciling it: call again later"
                        )
                    yield Pause(poll.wait(polls))
                elif response.status_code in terminal:
                    return read_answer(parse, response, public_request(response.request), 1)
                else:
                    raise ResponseValidationError(
                        f"{method} /{path} answered {response.status_code}, expected one of "
                        f"{sorted(terminal)} or the signed-retry statuses"
                    )
        except InvalidSignatureError as exc:
            if accepted and not restart_when_processing:
                # whatever the refusal of its re-send says (a lapsed challenge, a Request-Id
                # the service calls reused, no reason at all), the operation was accepted
                raise WalletOperationPendingError(
                    f"{method} /{path} was accepted (PROCESSING), then its re-send was refused "
                    f"({exc.code or exc.status}): read its state (the sessions or credentials "
                    "listed) before trying again, which could act a second time"
                ) from None
            # only a challenge this flow stamped restarts (a passkey's own Request-Id cannot)
            if not exc.challenge_lapsed or request is first or restarts >= poll.max_restarts:
                raise
            restarts += 1
            logger.info("%s /%s: the challenge lapsed; starting again", method, path)


class _Driver:
    """Steps through a flow: the next request or pause, with the last answer or error sent in
    (an error thrown into the flow, which may recover from it)."""

    def __init__(self, flow: Flow[Any]) -> None:
        self.flow = flow
        self.value: Any = None
        self.error: PaylensError | None = None
        self.result: Any = None

    def next(self) -> Step | None:
        try:
            if self.error is not None:
                return self.flow.throw(self.error)
            return self.flow.send(self.value)
        except StopIteration as done:
            self.result = done.value
            return None
        finally:
            self.value, self.error = None, None


def run_flow(client: Any, flow: Flow[T]) -> Any:
    """Drive `flow` with `client`: the answer for a `Client`, an awaitable for an
    `AsyncClient`."""
    if inspect.iscoroutinefunction(client.request):
        return _run_async(client, flow)
    driver = _Driver(flow)
    while (step := driver.next()) is not None:
        if isinstance(step, Pause):
            client._sleep(step.seconds)
            continue
        try:
            driver.value = client.request(step)
        except PaylensError as exc:
            driver.error = exc
    return cast(T, driver.result)


async def _run_async(client: Any, flow: Flow[T]) -> T:
    driver = _Driver(flow)
    while (step := driver.next()) is not None:
        if isinstance(step, Pause):
            await client._sleep(step.seconds)
            continue
        try:
            driver.value = await client.request(step)
        except PaylensError as exc:
            driver.error = exc
    return cast(T, driver.result)
