"""Wire shapes of customers, accounts and cards, and of their bank and wallet details.

Details that the world does not need for its logic (names, account numbers, addresses) are
derived from the entity's own id at render time: the same entity always shows the same details,
and they cost no memory. Sandbox data says so where the shapes allow: addresses, emails and
wallet addresses use `sandbox.paylens.invalid`, banks are "Paylens Sandbox Bank", notes start
with "[sandbox]".
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

import numpy as np

from ..currencies import CURRENCY_CODES, RECEIVE_OPTIONS, REGIONS, ReceiveOption, currency_wire
from ..generate.entities import (
    BUSINESS_KINDS,
    BUSINESS_TYPES,
    BUSINESS_WORDS,
    CARD_STATES,
    CUSTOMER_TYPES,
    ENTITY_TYPES,
    EXTERNAL_STATUSES,
    FIRST_NAMES,
    INTERNAL_TYPES,
    KYC_STATUSES,
    LAST_NAMES,
    NO_ROW,
    PURPOSES,
    Entities,
)

T = TypeVar("T")

SANDBOX_DOMAIN = "sandbox.paylens.invalid"
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_CITIES = {
    "US": ("San Francisco", "94107", "CA"), "GB": ("London", "EC1A 1BB", None), "DE": ("Berlin", "10115", None),
    "FR": ("Paris", "75002", None), "NL": ("Amsterdam", "1012 AB", None), "ES": ("Madrid", "28013", None),
    "CA": ("Toronto", "M5V 2T6", "ON"), "SG": ("Singapore", "048619", None), "HK": ("Hong Kong", "999077", None),
    "AE": ("Dubai", "00000", None), "MX": ("Mexico City", "06600", None), "BR": ("Sao Paulo", "01310-100", "SP"),
    "IN": ("Mumbai", "400001", "MH"), "NG": ("Lagos", "101233", None), "PH": ("Manila", "1000", None),
    "KE": ("Nairobi", "00100", None), "ZA": ("Cape Town", "8001", None), "JP": ("Tokyo", "100-0005", None),
    "KW": ("Kuwait City", "13001", None), "BH": ("Manama", "317", None), "CN": ("Shanghai", "200000", None),
    "ID": ("Jakarta", "10110", None), "VN": ("Hanoi", "100000", None), "CO": ("Bogota", "110111", None),
    "UG": ("Kampala", "256", None), "SN": ("Dakar", "10200", None),
}  # fmt: skip
_STREETS = (
    "Market",
    "Harbor",
    "Maple",
    "Station",
    "Garden",
    "River",
    "Hill",
    "Park",
    "Union",
    "Bridge",
)
_PHONE_PREFIX = {
    "KES": "+254",
    "IDR": "+62",
    "CNY": "+86",
    "COP": "+57",
    "UGX": "+256",
    "XOF": "+221",
}
_PROVIDERS = {"KES": "M-PESA", "UGX": "MTN MoMo", "XOF": "Orange Money"}
_ACCOUNT_DIGITS = {"GBP_ACCOUNT": 8, "NGN_ACCOUNT": 10, "CAD_ACCOUNT": 9, "ZAR_ACCOUNT": 11}
_ROUTING_NUMBERS = ("110000000", "021000021", "011401533", "091000019")
#: Fields of each account type (the interface's *AccountInfo shapes), besides paymentRails.
_FIELDS: dict[str, tuple[str, ...]] = {
    "USD_ACCOUNT": ("accountNumber", "routingNumber", "bankName", "bankAccountType"),
    "EUR_ACCOUNT": ("iban", "swiftCode"),
    "GBP_ACCOUNT": ("sortCode", "accountNumber"),
    "MXN_ACCOUNT": ("clabeNumber",),
    "INR_ACCOUNT": ("vpa", "accountNumber", "ifsc", "bankName"),
    "PHP_ACCOUNT": ("bankName", "accountNumber"),
    "NGN_ACCOUNT": ("accountNumber", "bankName"),
    "BRL_ACCOUNT": ("pixKey", "pixKeyType", "taxId"),
    "CAD_ACCOUNT": ("bankCode", "branchCode", "accountNumber"),
    "SGD_ACCOUNT": ("bankName", "accountNumber", "swiftCode"),
    "KES_ACCOUNT": ("phoneNumber", "provider"),
    "ZAR_ACCOUNT": ("accountNumber", "bankName"),
    "IDR_ACCOUNT": ("bankName", "accountNumber", "swiftCode", "phoneNumber"),
    "HKD_ACCOUNT": ("bankName", "accountNumber", "swiftCode"),
    "AED_ACCOUNT": ("iban", "swiftCode"),
    "CNY_ACCOUNT": ("accountNumber", "bankName", "phoneNumber"),
    "VND_ACCOUNT": ("bankName", "accountNumber", "swiftCode"),
    "COP_ACCOUNT": ("accountNumber", "bankAccountType", "bankName", "phoneNumber"),
    "UGX_ACCOUNT": ("phoneNumber", "provider"),
    "XOF_ACCOUNT": ("phoneNumber", "provider", "region"),
    "SWIFT_ACCOUNT": ("swiftCode", "bankName", "country", "accountNumber"),
    "LIGHTNING": ("lightningAddress",),
    "SPARK_WALLET": ("address",),
    "SOLANA_WALLET": ("address",),
    "BASE_WALLET": ("address",),
}
#: Extra fields a deposit instruction needs beyond the account's own (the Payment*Info shapes).
_PAYMENT_FIELDS = {
    "BRL_ACCOUNT": ("qrCode",),
    "COP_ACCOUNT": ("paymentUrl",),
    "SWIFT_ACCOUNT": ("accountHolderName",),
    "SPARK_WALLET": ("assetType",),
}
_WALLETS = frozenset({"LIGHTNING", "SPARK_WALLET", "SOLANA_WALLET", "BASE_WALLET"})


def iso(us: np.ndarray) -> list[str]:
    """RFC 3339 UTC timestamps (milliseconds, "Z") of microsecond epoch times."""
    ms = (np.asarray(us, dtype=np.int64) // 1000).astype("datetime64[ms]")
    texts: list[str] = np.datetime_as_string(ms, unit="ms", timezone="UTC").tolist()
    return texts


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso1(us: int) -> str:
    """`iso` of one time, without numpy's per-call cost (the same text)."""
    ms = int(us) // 1000
    at = _EPOCH + timedelta(milliseconds=ms)
    return f"{at:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def _digits(r: random.Random, n: int) -> str:
    return str(r.randrange(10 ** (n - 1), 10**n))


def _iban(country: str, bban: str) -> str:
    numeric = "".join(str(int(ch, 36)) for ch in bban + country) + "00"
    return f"{country}{98 - int(numeric) % 97:02d}{bban}"


def platform_card_id_of(lo: int) -> str:
    return f"sbx-card-{lo & 0xFFFFFFFF:08x}"


def handle(first: int, last: int, lo: int) -> str:
    return f"{FIRST_NAMES[first]}.{LAST_NAMES[last]}.{lo & 0xFFFF:04x}".lower()


def address(r: random.Random, country: str) -> dict[str, Any]:
    city, postal, state = _CITIES.get(country, ("Capital City", "00000", None))
    out: dict[str, Any] = {
        "line1": f"{r.randrange(1, 999)} {r.choice(_STREETS)} Street",
        "city": city,
        "postalCode": postal,
        "country": country,
    }
    if state:
        out["state"] = state
    return out


def account_details(
    account_type: str,
    currency: str,
    country: str,
    r: random.Random,
    holder: str,
    rails: list[str],
    *,
    payment: bool,
) -> dict[str, Any]:
    """An account's `accountInfo` (external account) or `accountOrWalletInfo` (deposit
    instructions, `payment=True`) fields of `account_type`, derived from `r`."""
    values: dict[str, Any] = {"accountType": account_type}
    names = _FIELDS[account_type] + (_PAYMENT_FIELDS.get(account_type, ()) if payment else ())
    tag = holder.lower().replace(" ", ".")
    for name in names:
        if name == "accountNumber":
            values[name] = _digits(r, _ACCOUNT_DIGITS.get(account_type, 12))
        elif name == "routingNumber":
            values[name] = r.choice(_ROUTING_NUMBERS)
        elif name == "bankName":
            values[name] = f"Paylens Sandbox Bank {country}"
        elif name == "bankAccountType":
            values[name] = "CHECKING"
        elif name == "iban":
            values[name] = _iban(country, _digits(r, 19) if country == "AE" else _digits(r, 18))
        elif name == "swiftCode":
            values[name] = f"SBOX{country}2L"
        elif name == "sortCode":
            values[name] = _digits(r, 6)
        elif name == "clabeNumber":
            values[name] = _digits(r, 18)
        elif name == "vpa":
            values[name] = f"{tag}@sbxbank"
        elif name == "ifsc":
            values[name] = f"SBXB0{_digits(r, 6)}"
        elif name == "pixKey":
            values[name] = f"{tag}@{SANDBOX_DOMAIN}"
        elif name == "pixKeyType":
            values[name] = "EMAIL"
        elif name == "taxId":
            values[name] = _digits(r, 11)
        elif name == "bankCode":
            values[name] = _digits(r, 3)
        elif name == "branchCode":
            values[name] = _digits(r, 5)
        elif name == "phoneNumber":
            values[name] = _PHONE_PREFIX.get(currency, "+1") + _digits(
                r, 9 if currency == "KES" else 10
            )
        elif name == "provider":
            values[name] = _PROVIDERS.get(currency, "Sandbox Mobile Money")
        elif name == "region":
            values[name] = "SN"
        elif name == "lightningAddress":
            values[name] = f"{tag}@{SANDBOX_DOMAIN}"
        elif name == "address":
            if account_type == "BASE_WALLET":
                values[name] = "0x" + "".join(r.choices("0123456789abcdef", k=40))
            elif account_type == "SPARK_WALLET":
                values[name] = "sp1" + "".join(r.choices(_BECH32, k=58))
            else:
                values[name] = "".join(r.choices(_B58, k=44))
        elif name == "qrCode":
            values[name] = (
                f"00020126580014br.gov.bcb.pix0136sandbox-{_digits(r, 12)}5204000053039865802BR"
            )
        elif name == "paymentUrl":
            values[name] = f"https://pay.{SANDBOX_DOMAIN}/cop/{_digits(r, 12)}"
        elif name == "accountHolderName":
            values[name] = holder
        elif name == "country":
            values[name] = country
        elif name == "assetType":
            values[name] = "BTC"
    if account_type not in _WALLETS:
        values["paymentRails"] = rails
    return values


class EntityViews:
    """Renders the entities of a world as the interface's JSON values."""

    def __init__(self, ents: Entities) -> None:
        self.e = ents
        self._by_uma: dict[str, int] | None = None
        self._by_card_id: dict[str, int] | None = None
        # the details each entity's seed derives (names, numbers, addresses) never change:
        # built on its first render, shared by the later ones (a render is serialised at once
        # and never altered, so sharing is safe)
        self._derived: dict[tuple[str, int], Any] = {}
        #: an internal account's (available, total) balances now and when they last changed
        #: (µs), by row (the world's ledger); None: its stored balance, both, since created
        self.balances: Callable[[int], tuple[int, int, int]] | None = None

    def _once(self, build: Callable[[int], T], i: int) -> T:
        """`build(i)`, built on the first call for entity `i` and kept (see `_derived`)."""
        key = (build.__name__, i)
        if key not in self._derived:
            self._derived[key] = build(i)
        return cast(T, self._derived[key])

    def customer_by_uma(self, uma_address: str) -> int:
        """The customer with this UMA address, or -2 (matches no row)."""
        if self._by_uma is None:
            handles = (self.customer_handle(i) for i in range(len(self.e.customers)))
            self._by_uma = {f"${h}@{SANDBOX_DOMAIN}": i for i, h in enumerate(handles)}
        return self._by_uma.get(uma_address, -2)

    def card_by_platform_id(self, platform_card_id: str) -> int:
        """The card with this platformCardId, or -2 (matches no row)."""
        if self._by_card_id is None:
            self._by_card_id = {
                platform_card_id_of(int(lo)): i for i, lo in enumerate(self.e.cards.lo.tolist())
            }
        return self._by_card_id.get(platform_card_id, -2)

    # --- names ------------------------------------------------------------------------------

    def customer_name(self, i: int) -> str:
        c = self.e.customers
        if c.kind[i] == 1:
            r = random.Random(int(c.lo[i]))
            return f"{r.choice(BUSINESS_WORDS)} {r.choice(BUSINESS_KINDS)} {ENTITY_TYPES[int(c.lo[i]) % 2]}"
        return f"{FIRST_NAMES[c.first[i]]} {LAST_NAMES[c.last[i]]}"

    def customer_handle(self, i: int) -> str:
        c = self.e.customers
        return handle(int(c.first[i]), int(c.last[i]), int(c.lo[i]))

    def holder_name(self, account: int) -> str:
        """Who holds an account: its beneficiary, else its owner, else the platform."""
        a = self.e.accounts
        if a.person[account] != NO_ROW:
            return self.e.people.name(int(a.person[account]))
        if a.owner[account] != NO_ROW:
            return self.customer_name(int(a.owner[account]))
        return "Paylens Sandbox Platform"

    # --- customers --------------------------------------------------------------------------

    def customer(self, i: int) -> dict[str, Any]:
        c = self.e.customers
        tag, address_, details = self._once(self._customer_details, i)
        out: dict[str, Any] = {
            "id": c.ids[i],
            "platformCustomerId": c.platform_ids[i],
            "customerType": CUSTOMER_TYPES[c.kind[i]],
            "region": REGIONS[c.region[i]][0],
            "currencies": [CURRENCY_CODES[k] for k in c.currencies[i]],
            "email": f"{tag}@{SANDBOX_DOMAIN}",
            "umaAddress": f"${tag}@{SANDBOX_DOMAIN}",  # as customer_by_uma finds it
            "createdAt": iso1(c.created[i]),
            "updatedAt": iso1(c.updated[i]),
            "isDeleted": bool(c.deleted[i]),
            "address": address_,
        }
        status = KYC_STATUSES[c.kyc[i]]
        if c.kind[i] == 1:
            out["kybStatus"] = status
        else:
            out["kycStatus"] = status
        out |= details
        return out

    def _customer_details(self, i: int) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """A customer's handle, address and identity details, derived from its seed."""
        c = self.e.customers
        r = random.Random(int(c.hi[i]))
        country = REGIONS[c.region[i]][0]
        address_ = address(r, country)
        details: dict[str, Any]
        if c.kind[i] == 1:
            details = {
                "businessInfo": {
                    "legalName": self.customer_name(i),
                    "country": country,
                    "registrationNumber": _digits(r, 9),
                    "entityType": ENTITY_TYPES[int(c.lo[i]) % 2],
                    "businessType": r.choice(BUSINESS_TYPES),
                    "purposeOfAccount": r.choice(PURPOSES),
                    "incorporatedOn": f"{r.randrange(1995, 2022)}-{r.randrange(1, 13):02d}-{r.randrange(1, 29):02d}",
                }
            }
        else:
            details = {
                "fullName": self.customer_name(i),
                "birthDate": (
                    f"{r.randrange(1950, 2004)}-{r.randrange(1, 13):02d}-{r.randrange(1, 29):02d}"
                ),
                "nationality": country,
            }
        return self.customer_handle(i), address_, details

    # --- accounts ---------------------------------------------------------------------------

    def deposit_instructions(
        self, currency: int, reference: str, seed: int, *, platform: bool
    ) -> dict[str, Any]:
        """PaymentInstructions for paying into an account in `currency`."""
        code = CURRENCY_CODES[currency]
        option = _deposit_option(code)
        r = random.Random(seed)
        holder = "Paylens Sandbox Platform" if platform else "Paylens Sandbox FBO"
        info = account_details(
            option.account_type,
            code,
            option.country,
            r,
            holder,
            [rail for rail, _ in option.rails if rail in _RAIL_NAMES],
            payment=True,
        )
        if option.account_type not in _WALLETS:
            info["reference"] = reference
        return {
            "accountOrWalletInfo": info,
            "instructionsNotes": f"[sandbox] Include reference {reference} with the payment.",
            "isPlatformAccount": bool(platform),
        }

    def internal_account(self, i: int) -> dict[str, Any]:
        a = self.e.accounts
        currency = int(a.currency[i])
        if self.balances is None:
            available, total, changed = int(a.balance[i]), int(a.balance[i]), int(a.created[i])
        else:
            available, total, changed = self.balances(i)
        balance = {"amount": available, "currency": currency_wire(currency)}
        created = iso1(int(a.created[i]))
        out: dict[str, Any] = {"id": a.ids[i]}
        if a.owner[i] != NO_ROW:
            out["customerId"] = self.e.customers.ids[a.owner[i]]
        out |= {
            "type": INTERNAL_TYPES[a.kind[i]],
            "status": "ACTIVE",
            "balance": balance,
            "totalBalance": {"amount": total, "currency": currency_wire(currency)},
            "fundingPaymentInstructions": self._once(self._funding_instructions, i),
            "createdAt": created,
            "updatedAt": iso1(changed),
        }
        if a.kind[i] == 2:
            out["privateEnabled"] = False
        return out

    def _funding_instructions(self, i: int) -> list[dict[str, Any]]:
        """An internal account's deposit instructions, derived from its seed."""
        a = self.e.accounts
        reference = f"SBX-DEP-{int(a.lo[i]) & 0xFFFFFFFF:08X}"
        return [
            self.deposit_instructions(
                int(a.currency[i]), reference, int(a.hi[i]), platform=a.owner[i] == NO_ROW
            )
        ]

    def _external_details(self, i: int) -> dict[str, Any]:
        """An external account's `accountInfo`, derived from its seed."""
        a = self.e.accounts
        option = RECEIVE_OPTIONS[a.kind[i]]
        r = random.Random(int(a.hi[i]))
        holder = self.holder_name(i)
        info = account_details(
            option.account_type,
            option.currency,
            option.country,
            r,
            holder,
            [rail for rail, _ in option.rails if rail in _RAIL_NAMES],
            payment=False,
        )
        if option.account_type not in _WALLETS:
            info["beneficiary"] = self._beneficiary(i, holder, option.country, r)
        return info

    def external_account(self, i: int) -> dict[str, Any]:
        a = self.e.accounts
        option = RECEIVE_OPTIONS[a.kind[i]]
        info = self._once(self._external_details, i)
        out: dict[str, Any] = {"id": a.ids[i]}
        if a.owner[i] != NO_ROW:
            out["customerId"] = self.e.customers.ids[a.owner[i]]
        out |= {
            "status": EXTERNAL_STATUSES[a.status[i]],
            "platformAccountId": f"sbx-ea-{int(a.lo[i]) & 0xFFFFFFFFFF:010x}",
            "ownershipType": "THIRD_PARTY" if a.third_party[i] else "FIRST_PARTY",
            "currency": option.currency,
            "accountInfo": info,
        }
        return out

    def _beneficiary(self, i: int, holder: str, country: str, r: random.Random) -> dict[str, Any]:
        a, c = self.e.accounts, self.e.customers
        owner = int(a.owner[i])
        if a.person[i] == NO_ROW and owner != NO_ROW and c.kind[owner] == 1:
            return {
                "beneficiaryType": "BUSINESS",
                "legalName": holder,
                "countryOfResidence": country,
                "address": address(r, country),
            }
        return {
            "beneficiaryType": "INDIVIDUAL",
            "fullName": holder,
            "countryOfResidence": country,
            "address": address(r, country),
        }

    # --- cards ------------------------------------------------------------------------------

    def card(self, i: int) -> dict[str, Any]:
        k = self.e.cards
        state = CARD_STATES[k.state[i]]
        reason = None
        if state == "CLOSED":
            reason = "ISSUER_REJECTED" if k.closed_by_issuer[i] else "CLOSED_BY_PLATFORM"
        created, updated = iso1(k.created[i]), iso1(k.updated[i])
        return {
            "id": k.ids[i],
            "cardholderId": self.e.customers.ids[k.holder[i]],
            "platformCardId": platform_card_id_of(int(k.lo[i])),
            "state": state,
            "stateReason": reason,
            "brand": "VISA" if k.visa[i] else "MASTERCARD",
            "form": "VIRTUAL",
            "last4": f"{int(k.last4[i]):04d}",
            "expMonth": int(k.expires[i]) % 100,
            "expYear": int(k.expires[i]) // 100,
            "fundingSources": [self.e.accounts.ids[a] for a in k.funding[i]],
            "maxSpendPerTransaction": k.max_spend[i],
            "currency": CURRENCY_CODES[k.currency[i]],
            "createdAt": created,
            "updatedAt": updated,
        }


_RAIL_NAMES = frozenset(
    {
        "ACH",
        "WIRE",
        "RTP",
        "FEDNOW",
        "SEPA",
        "SEPA_INSTANT",
        "FASTER_PAYMENTS",
        "UPI",
        "NEFT",
        "RTGS",
        "PIX",
        "SPEI",
        "BANK_TRANSFER",
        "PAYNOW",
        "FAST",
        "MOBILE_MONEY",
        "SWIFT",
    }
)


#: Account types the interface allows in deposit instructions (its PaymentAccountType).
_PAYMENT_TYPES = frozenset(
    {
        "USD_ACCOUNT",
        "BRL_ACCOUNT",
        "MXN_ACCOUNT",
        "COP_ACCOUNT",
        "EUR_ACCOUNT",
        "INR_ACCOUNT",
        "NGN_ACCOUNT",
        "CAD_ACCOUNT",
        "GBP_ACCOUNT",
        "HKD_ACCOUNT",
        "IDR_ACCOUNT",
        "PHP_ACCOUNT",
        "SGD_ACCOUNT",
        "VND_ACCOUNT",
        "SPARK_WALLET",
        "SOLANA_WALLET",
        "BASE_WALLET",
    }
)


def _deposit_option(code: str) -> ReceiveOption:
    """How money is paid into an account in `code`: its domestic details where the interface
    has a deposit shape for them, else a SWIFT account in the currency's country."""
    domestic = [o for o in RECEIVE_OPTIONS if o.currency == code and o.account_type != "LIGHTNING"]
    for option in domestic:
        if option.account_type in _PAYMENT_TYPES:
            return option
    return ReceiveOption(
        "SWIFT_ACCOUNT", code, (("SWIFT", 1.0),), 0.0, domestic[0].country if domestic else "US"
    )
