"""Reference data of the simulated service: currencies, reference prices, rails and their terms.

Prices are USD per one MAJOR unit of a currency (a fixed snapshot, so data is reproducible).
The reference mid rate of a corridor is `mid_rate(S, R) = usd(R) / usd(S)`: sending-currency
major units per one receiving-currency major unit, the interface's direction for
`exchangeRate`. These are the centres the sandbox's rates move around day by day (`midrates`:
what `GET /exchange-rates` serves); transactions trade at the day's mid rate times (1 + a
per-transaction spread).

A *channel* is how a payout or deposit settles: one of the interface's `PaymentRail` values, or a
channel with no rail (crypto networks, UMA, transfers inside the service), where the wire's
`paymentRail` is null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Currency:
    code: str
    name: str
    symbol: str
    decimals: int
    usd: float  # reference price: USD per one major unit
    group: str  # pricing group of the corridor into this currency (see VARIABLE_FEE_RATES)


CURRENCIES: tuple[Currency, ...] = (
    Currency("USD", "United States Dollar", "$", 2, 1.0, "major"),
    Currency("EUR", "Euro", "€", 2, 1.08, "major"),
    Currency("GBP", "British Pound", "£", 2, 1.27, "major"),
    Currency("JPY", "Japanese Yen", "¥", 0, 0.0067, "major"),
    Currency("KWD", "Kuwaiti Dinar", "د.ك", 3, 3.25, "emerging"),
    Currency("BHD", "Bahraini Dinar", ".د.ب", 3, 2.65, "emerging"),
    Currency("CAD", "Canadian Dollar", "CA$", 2, 0.73, "major"),
    Currency("SGD", "Singapore Dollar", "S$", 2, 0.75, "major"),
    Currency("HKD", "Hong Kong Dollar", "HK$", 2, 0.128, "major"),
    Currency("AED", "UAE Dirham", "د.إ", 2, 0.2723, "emerging"),
    Currency("CNY", "Chinese Yuan", "CN¥", 2, 0.138, "emerging"),
    Currency("INR", "Indian Rupee", "₹", 2, 0.012, "emerging"),
    Currency("BRL", "Brazilian Real", "R$", 2, 0.18, "emerging"),
    Currency("MXN", "Mexican Peso", "MX$", 2, 0.055, "emerging"),
    Currency("PHP", "Philippine Peso", "₱", 2, 0.0175, "emerging"),
    Currency("IDR", "Indonesian Rupiah", "Rp", 2, 0.000062, "emerging"),
    Currency("VND", "Vietnamese Dong", "₫", 0, 0.000039, "emerging"),
    Currency("COP", "Colombian Peso", "COL$", 2, 0.00024, "emerging"),
    Currency("ZAR", "South African Rand", "R", 2, 0.055, "emerging"),
    Currency("NGN", "Nigerian Naira", "₦", 2, 0.00065, "frontier"),
    Currency("KES", "Kenyan Shilling", "KSh", 2, 0.0077, "frontier"),
    Currency("UGX", "Ugandan Shilling", "USh", 0, 0.00027, "frontier"),
    Currency("XOF", "West African CFA Franc", "CFA", 0, 0.00165, "frontier"),
    Currency("BTC", "Bitcoin", "₿", 8, 60_000.0, "crypto"),
    Currency("USDC", "USD Coin", "", 6, 1.0, "crypto"),
)
CURRENCY_CODES: tuple[str, ...] = tuple(c.code for c in CURRENCIES)
CURRENCY_INDEX: dict[str, int] = {code: i for i, code in enumerate(CURRENCY_CODES)}
DECIMALS = np.array([c.decimals for c in CURRENCIES], dtype=np.int64)
USD_PRICE = np.array([c.usd for c in CURRENCIES], dtype=np.float64)
BTC_USD = CURRENCIES[CURRENCY_INDEX["BTC"]].usd
#: MID[s, r]: reference mid rate, sending major units per receiving major unit.
MID_RATES = USD_PRICE[None, :] / USD_PRICE[:, None]
CRYPTO_CODES = frozenset({"BTC", "USDC"})

#: 10.0 ** k for k in -16..16 (Python's correctly rounded pow), indexed by k + 16.
_POW10 = np.array([10.0**k for k in range(-16, 17)], dtype=np.float64)


def pow10(k: np.ndarray | int) -> Any:
    """The float64 nearest to 10**k (k an int or an int array), as SQL's `power(10, k)` gives."""
    return _POW10[np.asarray(k) + 16]


def mid_rate(sending: str, receiving: str) -> float:
    """Reference mid rate: `sending` major units per one `receiving` major unit."""
    return float(MID_RATES[CURRENCY_INDEX[sending], CURRENCY_INDEX[receiving]])


def currency_wire(index: int) -> dict[str, Any]:
    """The interface's Currency object of a currency (a fresh dict)."""
    c = CURRENCIES[index]
    return {"code": c.code, "name": c.name, "symbol": c.symbol, "decimals": c.decimals}


def to_minor(usd_amount: np.ndarray | float, index: np.ndarray | int) -> Any:
    """A USD amount converted at the reference price and rounded to minor units of `index`."""
    scale = USD_PRICE[index] / pow10(DECIMALS[index])
    return np.rint(np.asarray(usd_amount) / scale).astype(np.int64)


# --- channels -----------------------------------------------------------------------------------

PAYMENT_RAILS: tuple[str, ...] = (
    "ACH", "ACH_COLOMBIA", "BANK_TRANSFER", "BRE_B", "CIPS", "FAST", "FASTER_PAYMENTS",
    "FEDNOW", "INSTAPAY", "MOBILE_MONEY", "NEFT", "PAYNOW", "PESONET", "PIX", "RTGS", "RTP",
    "SEPA", "SEPA_INSTANT", "SPEI", "SWIFT", "UNIONPAY", "UPI", "WIRE",
)  # fmt: skip
#: Channels without a PaymentRail: crypto networks, UMA counterparties, moves inside the service.
RAILLESS: tuple[str, ...] = ("LIGHTNING", "SPARK", "SOLANA", "BASE", "UMA", "INTERNAL")
CHANNELS: tuple[str, ...] = PAYMENT_RAILS + RAILLESS
CHANNEL_INDEX: dict[str, int] = {name: i for i, name in enumerate(CHANNELS)}
N_RAILS = len(PAYMENT_RAILS)


@dataclass(frozen=True)
class ChannelTerms:
    """How a channel settles and what it costs.

    `timeline_s`: expected seconds from quote execution to settlement (the wire's
    `settlementTimelineSeconds`; `expectedSettlementAt` is set only when not `instant`).
    `service_fee_usd` / `counterparty_fee_usd`: the fixed fees (`gridApiFixedFee`, in the
    sending currency, and `counterpartyFixedFee`, in the receiving currency) in USD, converted at
    reference prices. `quote_ttl_s`: how long a quote on this channel stays executable.
    """

    timeline_s: int
    instant: bool
    service_fee_usd: float
    counterparty_fee_usd: float
    quote_ttl_s: int = 900


_HOUR, _DAY = 3600, 86_400
_TERMS: dict[str, ChannelTerms] = {
    "ACH": ChannelTerms(_DAY, False, 0.25, 0.0),
    "WIRE": ChannelTerms(4 * _HOUR, False, 15.0, 0.0),
    "RTP": ChannelTerms(5, True, 0.50, 0.0, 300),
    "FEDNOW": ChannelTerms(5, True, 0.45, 0.0, 300),
    "SEPA": ChannelTerms(_DAY, False, 0.30, 0.0),
    "SEPA_INSTANT": ChannelTerms(10, True, 0.50, 0.0, 300),
    "FASTER_PAYMENTS": ChannelTerms(20, True, 0.40, 0.0, 300),
    "BANK_TRANSFER": ChannelTerms(6 * _HOUR, False, 1.00, 0.50),
    "MOBILE_MONEY": ChannelTerms(60, True, 0.50, 0.30, 300),
    "PIX": ChannelTerms(5, True, 0.20, 0.0, 300),
    "SPEI": ChannelTerms(30, True, 0.30, 0.20, 300),
    "UPI": ChannelTerms(10, True, 0.20, 0.0, 300),
    "NEFT": ChannelTerms(2 * _HOUR, False, 0.30, 0.10),
    "RTGS": ChannelTerms(1800, False, 2.00, 0.50),
    "PAYNOW": ChannelTerms(15, True, 0.40, 0.0, 300),
    "FAST": ChannelTerms(30, True, 0.40, 0.0, 300),
    "SWIFT": ChannelTerms(3 * _DAY, False, 20.0, 12.0, 1800),
    "LIGHTNING": ChannelTerms(3, True, 0.05, 0.01, 120),
    "SPARK": ChannelTerms(5, True, 0.05, 0.0, 120),
    "SOLANA": ChannelTerms(30, True, 0.10, 0.01, 120),
    "BASE": ChannelTerms(60, True, 0.10, 0.02, 120),
    "UMA": ChannelTerms(30, True, 0.10, 0.05, 300),
    "INTERNAL": ChannelTerms(1, True, 0.0, 0.0, 300),
}
_UNUSED = ChannelTerms(_DAY, False, 1.0, 0.5)
TERMS: tuple[ChannelTerms, ...] = tuple(_TERMS.get(name, _UNUSED) for name in CHANNELS)
TIMELINE_S = np.array([t.timeline_s for t in TERMS], dtype=np.int64)
INSTANT = np.array([t.instant for t in TERMS], dtype=bool)
QUOTE_TTL_S = np.array([t.quote_ttl_s for t in TERMS], dtype=np.int64)
SERVICE_FEE_USD = np.array([t.service_fee_usd for t in TERMS], dtype=np.float64)
COUNTERPARTY_FEE_USD = np.array([t.counterparty_fee_usd for t in TERMS], dtype=np.float64)

#: Cancellable bank transfers (spec §4.1): ACH pushes and pulls, and wires.
CANCELLABLE_CHANNELS = frozenset({CHANNEL_INDEX["ACH"], CHANNEL_INDEX["WIRE"]})
#: How long after creation a transfer can still be recalled from the banking partner, in
#: seconds (uniform range): until the ACH batch file is sent, or the wire is released.
CANCEL_WINDOW_S: dict[int, tuple[int, int]] = {
    CHANNEL_INDEX["ACH"]: (1 * _HOUR, 8 * _HOUR),
    CHANNEL_INDEX["WIRE"]: (5 * 60, 45 * 60),
}

#: Variable fee rate `gridApiVariableFeeRate` by pricing group: (individual, business).
VARIABLE_FEE_RATES: dict[str, tuple[float, float]] = {
    "major": (0.0025, 0.002),
    "emerging": (0.004, 0.003),
    "frontier": (0.006, 0.005),
    "crypto": (0.001, 0.0008),
}
#: FX spread over the reference mid rate by pricing group (uniform range of fractions).
SPREADS: dict[str, tuple[float, float]] = {
    "major": (0.001, 0.004),
    "emerging": (0.003, 0.008),
    "frontier": (0.005, 0.010),
    "crypto": (0.002, 0.006),
}
CURRENCY_GROUP = np.array(
    [("major", "emerging", "frontier", "crypto").index(c.group) for c in CURRENCIES]
)
RATE_BY_GROUP = np.array(
    [VARIABLE_FEE_RATES[g] for g in ("major", "emerging", "frontier", "crypto")]
)
SPREAD_BY_GROUP = np.array([SPREADS[g] for g in ("major", "emerging", "frontier", "crypto")])
#: The spread a new quote gets (mid of its group's range), so quotes are deterministic.
QUOTE_SPREAD = SPREAD_BY_GROUP.mean(axis=1)


# --- account types --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReceiveOption:
    """A kind of external account: its `accountType`, currency, rails (with how often each is
    used) and how popular the corridor into it is among senders."""

    account_type: str
    currency: str
    rails: tuple[tuple[str, float], ...]
    popularity: float
    country: str


RECEIVE_OPTIONS: tuple[ReceiveOption, ...] = (
    ReceiveOption("USD_ACCOUNT", "USD", (("ACH", 0.5), ("WIRE", 0.15), ("RTP", 0.2), ("FEDNOW", 0.15)), 14, "US"),
    ReceiveOption("EUR_ACCOUNT", "EUR", (("SEPA", 0.55), ("SEPA_INSTANT", 0.45)), 10, "DE"),
    ReceiveOption("GBP_ACCOUNT", "GBP", (("FASTER_PAYMENTS", 1.0),), 6, "GB"),
    ReceiveOption("MXN_ACCOUNT", "MXN", (("SPEI", 1.0),), 12, "MX"),
    ReceiveOption("INR_ACCOUNT", "INR", (("UPI", 0.55), ("NEFT", 0.35), ("RTGS", 0.10)), 10, "IN"),
    ReceiveOption("PHP_ACCOUNT", "PHP", (("BANK_TRANSFER", 1.0),), 8, "PH"),
    ReceiveOption("NGN_ACCOUNT", "NGN", (("BANK_TRANSFER", 1.0),), 6, "NG"),
    ReceiveOption("BRL_ACCOUNT", "BRL", (("PIX", 1.0),), 5, "BR"),
    ReceiveOption("CAD_ACCOUNT", "CAD", (("BANK_TRANSFER", 1.0),), 3, "CA"),
    ReceiveOption("SGD_ACCOUNT", "SGD", (("PAYNOW", 0.4), ("FAST", 0.6)), 2, "SG"),
    ReceiveOption("KES_ACCOUNT", "KES", (("MOBILE_MONEY", 1.0),), 3, "KE"),
    ReceiveOption("ZAR_ACCOUNT", "ZAR", (("BANK_TRANSFER", 1.0),), 2, "ZA"),
    ReceiveOption("IDR_ACCOUNT", "IDR", (("BANK_TRANSFER", 1.0),), 2, "ID"),
    ReceiveOption("HKD_ACCOUNT", "HKD", (("BANK_TRANSFER", 1.0),), 2, "HK"),
    ReceiveOption("AED_ACCOUNT", "AED", (("BANK_TRANSFER", 1.0),), 2, "AE"),
    ReceiveOption("CNY_ACCOUNT", "CNY", (("BANK_TRANSFER", 0.7), ("MOBILE_MONEY", 0.3)), 2, "CN"),
    ReceiveOption("VND_ACCOUNT", "VND", (("BANK_TRANSFER", 1.0),), 2, "VN"),
    ReceiveOption("COP_ACCOUNT", "COP", (("BANK_TRANSFER", 0.6), ("MOBILE_MONEY", 0.4)), 2, "CO"),
    ReceiveOption("UGX_ACCOUNT", "UGX", (("MOBILE_MONEY", 1.0),), 1, "UG"),
    ReceiveOption("XOF_ACCOUNT", "XOF", (("MOBILE_MONEY", 1.0),), 1, "SN"),
    ReceiveOption("SWIFT_ACCOUNT", "JPY", (("SWIFT", 1.0),), 1.5, "JP"),
    ReceiveOption("SWIFT_ACCOUNT", "KWD", (("SWIFT", 1.0),), 0.7, "KW"),
    ReceiveOption("SWIFT_ACCOUNT", "BHD", (("SWIFT", 1.0),), 0.5, "BH"),
    ReceiveOption("LIGHTNING", "BTC", (("LIGHTNING", 1.0),), 2, "US"),
    ReceiveOption("SPARK_WALLET", "BTC", (("SPARK", 1.0),), 1, "US"),
    ReceiveOption("SOLANA_WALLET", "USDC", (("SOLANA", 1.0),), 2, "US"),
    ReceiveOption("BASE_WALLET", "USDC", (("BASE", 1.0),), 1, "US"),
)  # fmt: skip
OPTION_CURRENCY = np.array([CURRENCY_INDEX[o.currency] for o in RECEIVE_OPTIONS], dtype=np.int64)
OPTION_POPULARITY = np.array([o.popularity for o in RECEIVE_OPTIONS], dtype=np.float64)
#: The option of each currency's domestic bank account (an own account in the home currency).
HOME_OPTION: dict[str, int] = {
    o.currency: i
    for i, o in reversed(list(enumerate(RECEIVE_OPTIONS)))
    if o.account_type != "SWIFT_ACCOUNT"
}
#: Channel a new quote picks when the platform names no rail (the first, cheapest, listed rail).
AUTO_CHANNEL = np.array([CHANNEL_INDEX[o.rails[0][0]] for o in RECEIVE_OPTIONS], dtype=np.int64)

#: Home regions of customers: (country, home currency, share, needs Strong Customer Auth).
REGIONS: tuple[tuple[str, str, float, bool], ...] = (
    ("US", "USD", 45, False), ("GB", "GBP", 8, False), ("DE", "EUR", 5, True),
    ("FR", "EUR", 4, True), ("NL", "EUR", 2, True), ("ES", "EUR", 3, True),
    ("CA", "CAD", 4, False), ("SG", "SGD", 3, False), ("HK", "HKD", 2, False),
    ("AE", "AED", 3, False), ("MX", "MXN", 5, False), ("BR", "BRL", 4, False),
    ("IN", "INR", 4, False), ("NG", "NGN", 3, False), ("PH", "PHP", 2, False),
    ("KE", "KES", 2, False), ("ZA", "ZAR", 1, False),
)  # fmt: skip
#: Deposit rails into an internal account, by its currency (bank push or pull).
DEPOSIT_RAILS: dict[str, tuple[tuple[str, float], ...]] = {
    "USD": (("ACH", 0.45), ("WIRE", 0.25), ("RTP", 0.15), ("FEDNOW", 0.15)),
    "EUR": (("SEPA", 0.6), ("SEPA_INSTANT", 0.4)),
    "GBP": (("FASTER_PAYMENTS", 1.0),),
    "MXN": (("SPEI", 1.0),),
    "BRL": (("PIX", 1.0),),
    "INR": (("UPI", 0.5), ("NEFT", 0.5)),
    "SGD": (("FAST", 1.0),),
    "KES": (("MOBILE_MONEY", 1.0),),
    "BTC": (("LIGHTNING", 1.0),),
    "USDC": (("SOLANA", 1.0),),
}
DEFAULT_DEPOSIT_RAILS: tuple[tuple[str, float], ...] = (("BANK_TRANSFER", 1.0),)
#: Currencies that UMA senders abroad pay in.
UMA_SENDING = ("USD", "EUR", "GBP", "CAD", "KWD", "BHD", "JPY", "AED", "SGD", "HKD")
#: Currencies a customer may fund a payout in by pushing money to payment instructions.
FUNDABLE = ("USD", "EUR", "GBP", "MXN", "USDC")
