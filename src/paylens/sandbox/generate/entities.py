"""Generation of the sandbox's customers, accounts, cards, agents and wallet credentials.

Entities are few next to transactions (a customer per ~50 transactions, at most 20,000), so they
are kept as compact numpy columns plus the strings the service shows (ids); their other wire
details (names, account numbers) are derived at render time from their ids, so they cost no
memory. Every entity is created before the generated period starts, so no transaction predates
its customer, account or card. Rows of each table are in (createdAt, id) order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..currencies import (
    CURRENCY_INDEX,
    HOME_OPTION,
    OPTION_POPULARITY,
    RECEIVE_OPTIONS,
    REGIONS,
    USD_PRICE,
    to_minor,
)
from .profiles import DEFAULT, Profile, card_accounts, internal_holders

US_PER_DAY = 86_400_000_000
NO_ROW = -1

INTERNAL_TYPES = ("INTERNAL_FIAT", "INTERNAL_CRYPTO", "EMBEDDED_WALLET")
CUSTOMER_TYPES = ("INDIVIDUAL", "BUSINESS")
KYC_STATUSES = ("APPROVED", "PENDING", "HOLD", "REJECTED", "UNVERIFIED")
CARD_STATES = ("PENDING_KYC", "PROCESSING", "ACTIVE", "FROZEN", "CLOSED")
EXTERNAL_STATUSES = ("ACTIVE", "PENDING", "PENDING_OWNERSHIP_VERIFICATION", "UNVERIFIED")

FIRST_NAMES = (
    "Amara", "Bruno", "Chen", "Diego", "Elena", "Farah", "Gustavo", "Hana", "Ibrahim", "Julia",
    "Kofi", "Lucia", "Mateo", "Nadia", "Oliver", "Priya", "Quentin", "Rosa", "Sanjay", "Tomas",
    "Uma", "Victor", "Wei", "Ximena", "Yusuf", "Zara", "Aiko", "Bilal", "Camila", "Dmitri",
    "Esther", "Felipe", "Grace", "Hugo", "Ines", "Jamal", "Kiran", "Leila", "Marco", "Nia",
    "Omar", "Paula", "Rafael", "Sofia", "Tariq", "Valentina", "William", "Yara", "Zoe", "Adaeze",
)  # fmt: skip
LAST_NAMES = (
    "Okafor", "Silva", "Wang", "Garcia", "Novak", "Haddad", "Pereira", "Kim", "Mensah", "Rossi",
    "Patel", "Smith", "Nguyen", "Fernandez", "Muller", "Sato", "Kowalski", "Santos", "Ali", "Brown",
    "Reyes", "Cohen", "Dubois", "Eriksen", "Fischer", "Gonzalez", "Hernandez", "Ito", "Jensen",
    "Khan", "Lopez", "Martin", "Nakamura", "Ortiz", "Popescu", "Quispe", "Ramos", "Schmidt",
    "Tanaka", "Usman", "Varga", "Walker", "Yilmaz", "Zhang", "Adeyemi", "Bianchi", "Costa",
    "Das", "Evans", "Mwangi",
)  # fmt: skip
BUSINESS_WORDS = (
    "Acme", "Blue Harbor", "Cedar", "Delta", "Evergreen", "Falcon", "Granite", "Horizon",
    "Indigo", "Juniper", "Keystone", "Lumen", "Meridian", "Northwind", "Orchid", "Pinnacle",
    "Quarry", "Riverstone", "Summit", "Tidewater", "Umber", "Vertex", "Willow", "Zenith",
)  # fmt: skip
BUSINESS_KINDS = (
    "Trading",
    "Logistics",
    "Studios",
    "Imports",
    "Labs",
    "Foods",
    "Textiles",
    "Health",
)
ENTITY_TYPES = ("LLC", "CORPORATION", "PARTNERSHIP", "SOLE_PROPRIETORSHIP")
BUSINESS_TYPES = (
    "WHOLESALE_TRADE",
    "RETAIL_TRADE",
    "INFORMATION",
    "PROFESSIONAL_SCIENTIFIC_AND_TECHNICAL_SERVICES",
    "TRANSPORTATION_AND_WAREHOUSING",
    "MANUFACTURING",
)
PURPOSES = (
    "SUPPLIER_PAYMENTS",
    "CONTRACTOR_PAYOUTS",
    "CROSS_BORDER_B2B",
    "MARKETPLACE_SELLER_PAYOUTS",
)


def new_uuids(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """`n` random version-4 UUIDs as (high, low) 64-bit halves."""
    hi = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    lo = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    hi = (hi & np.uint64(0xFFFF_FFFF_FFFF_0FFF)) | np.uint64(0x4000)
    lo = (lo & np.uint64(0x3FFF_FFFF_FFFF_FFFF)) | np.uint64(0x8000_0000_0000_0000)
    return hi, lo


def uuid_text(hi: int, lo: int) -> str:
    h = f"{hi:016x}{lo:016x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_UUID_DIGITS = np.array([k for k in range(36) if k not in (8, 13, 18, 23)])


def uuid_texts(hi: np.ndarray, lo: np.ndarray) -> list[str]:
    """`uuid_text` of many UUIDs at once (vectorised)."""
    octets = np.stack([hi, lo], axis=1).astype(">u8").view(np.uint8).reshape(len(hi), 16)
    nibbles = np.empty((len(hi), 32), dtype=np.uint8)
    nibbles[:, 0::2] = octets >> 4
    nibbles[:, 1::2] = octets & 15
    out = np.full((len(hi), 36), ord("-"), dtype=np.uint8)
    out[:, _UUID_DIGITS] = _HEX[nibbles]
    text = out.tobytes().decode("ascii")
    return [text[k : k + 36] for k in range(0, len(text), 36)]


def parse_uuid(text: str) -> tuple[int, int] | None:
    """(high, low) of a canonical lower- or upper-case UUID, or None."""
    if len(text) != 36 or text[8] != "-" or text[13] != "-" or text[18] != "-" or text[23] != "-":
        return None
    try:
        value = int(text.replace("-", ""), 16)
    except ValueError:
        return None
    return value >> 64, value & (2**64 - 1)


def ids(prefix: str, hi: np.ndarray, lo: np.ndarray) -> list[str]:
    return [f"{prefix}:{text}" for text in uuid_texts(hi, lo)]


def pick_weighted(rng: np.random.Generator, weights: np.ndarray, n: int) -> np.ndarray:
    """`n` indices drawn with probability proportional to `weights`."""
    return pick_cumulative(rng, np.cumsum(weights, dtype=np.float64), n)


def pick_cumulative(rng: np.random.Generator, cum: np.ndarray, n: int) -> np.ndarray:
    """`pick_weighted` given the weights' cumulative sums."""
    picked = np.searchsorted(cum, rng.random(n) * cum[-1], side="right")
    return np.asarray(picked.clip(0, len(cum) - 1))


def _order(created: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    return np.lexsort((lo, hi, created))


@dataclass
class ItemsByOwner:
    """Per-owner lists: items of owner k are `items[start[k]:start[k+1]]`."""

    items: np.ndarray
    start: np.ndarray

    @classmethod
    def build(cls, owners: np.ndarray, items: np.ndarray, n_owners: int) -> ItemsByOwner:
        order = np.argsort(owners, kind="stable")
        counts = np.bincount(owners, minlength=n_owners)
        return cls(items[order], np.concatenate(([0], np.cumsum(counts))))

    def count(self, owners: np.ndarray) -> np.ndarray:
        return np.asarray(self.start[owners + 1] - self.start[owners])

    def pick(self, rng: np.random.Generator, owners: np.ndarray) -> np.ndarray:
        """A uniformly chosen item of each owner, or NO_ROW for owners without items."""
        count = self.count(owners)
        offset = (rng.random(len(owners)) * np.maximum(count, 1)).astype(np.int64)
        picked = (
            self.items[np.minimum(self.start[owners] + offset, len(self.items) - 1)]
            if len(self.items)
            else np.zeros(len(owners), np.int64)
        )
        return np.where(count > 0, picked, NO_ROW)

    def of(self, owner: int) -> np.ndarray:
        return self.items[self.start[owner] : self.start[owner + 1]]


@dataclass
class Customers:
    hi: np.ndarray
    lo: np.ndarray
    kind: np.ndarray  # index into CUSTOMER_TYPES
    region: np.ndarray  # index into REGIONS
    home: np.ndarray  # currency index
    created: np.ndarray
    updated: np.ndarray
    kyc: np.ndarray  # index into KYC_STATUSES
    deleted: np.ndarray
    first: np.ndarray
    last: np.ndarray
    weight: np.ndarray  # relative activity
    ids: list[str] = field(default_factory=list)
    platform_ids: list[str] = field(default_factory=list)
    currencies: list[list[int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.hi)


@dataclass
class Accounts:
    """Internal and external accounts of customers and of the platform (owner NO_ROW)."""

    hi: np.ndarray
    lo: np.ndarray
    external: np.ndarray
    owner: np.ndarray
    currency: np.ndarray
    kind: np.ndarray  # internal: index into INTERNAL_TYPES; external: index into RECEIVE_OPTIONS
    third_party: np.ndarray
    status: np.ndarray  # external: index into EXTERNAL_STATUSES; internal: always ACTIVE
    person: np.ndarray  # beneficiary in the people pool, or NO_ROW for the owner themself
    created: np.ndarray
    balance: np.ndarray
    ids: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.hi)


@dataclass
class Cards:
    hi: np.ndarray
    lo: np.ndarray
    holder: np.ndarray
    account: np.ndarray
    currency: np.ndarray
    state: np.ndarray  # index into CARD_STATES (mutable)
    closed_by_issuer: np.ndarray
    visa: np.ndarray
    last4: np.ndarray
    expires: np.ndarray  # year * 100 + month
    created: np.ndarray
    updated: np.ndarray  # (mutable)
    max_spend: list[int | None]
    funding: list[list[int]]
    ids: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.hi)


@dataclass
class People:
    """Counterparties outside the platform: beneficiaries and UMA senders and receivers."""

    first: np.ndarray
    last: np.ndarray
    country: np.ndarray  # index into REGIONS

    def name(self, i: int) -> str:
        return f"{FIRST_NAMES[self.first[i]]} {LAST_NAMES[self.last[i]]}"

    def __len__(self) -> int:
        return len(self.first)


@dataclass
class Entities:
    customers: Customers
    accounts: Accounts
    cards: Cards
    people: People
    agent_ids: list[str]
    agent_of: np.ndarray  # per customer: index into agent_ids or NO_ROW
    internal_of: ItemsByOwner  # per customer: internal accounts
    beneficiaries_of: ItemsByOwner  # per customer: third-party external accounts
    own_external: np.ndarray  # per customer: the first-party external account in the home currency
    home_internal: np.ndarray  # per customer: the internal fiat account in the home currency
    usd_internal: np.ndarray  # per customer: USD internal fiat account or NO_ROW
    account_index: dict[str, int]
    customer_index: dict[str, int]
    platform_customer_index: dict[str, int]
    card_index: dict[str, int]
    platform_internal: np.ndarray  # platform internal account per currency, or NO_ROW


def customer_count(transactions: int, profile: Profile = DEFAULT) -> int:
    if profile.customers_per_transaction is not None:
        return max(30, round(transactions * profile.customers_per_transaction))
    return int(min(20_000, max(30, transactions // 50)))


def generate_entities(
    rng: np.random.Generator, n_customers: int, start_us: int, profile: Profile = DEFAULT
) -> Entities:
    people = People(
        rng.integers(0, len(FIRST_NAMES), 4096),
        rng.integers(0, len(LAST_NAMES), 4096),
        pick_weighted(rng, np.array([r[2] for r in REGIONS]), 4096),
    )
    customers = _customers(rng, n_customers, start_us)
    accounts, internal_of, bene_of, own_external, usd_internal, platform_internal = _accounts(
        rng, customers, people, start_us, profile
    )
    cards = _cards(rng, customers, accounts, start_us, profile)
    home = ~accounts.external & (accounts.owner >= 0) & (accounts.kind == 0)
    home &= accounts.currency == customers.home[np.maximum(accounts.owner, 0)]
    home_internal = np.full(len(customers), NO_ROW, dtype=np.int64)
    home_internal[accounts.owner[home]] = np.flatnonzero(home)
    n_agents = max(1, len(customers) // 60)
    agent_customers = np.unique(pick_weighted(rng, customers.weight, n_agents * 2))[:n_agents]
    agent_of = np.full(len(customers), NO_ROW, dtype=np.int64)
    agent_of[agent_customers] = np.arange(len(agent_customers))
    a_hi, a_lo = new_uuids(rng, len(agent_customers))
    return Entities(
        customers=customers,
        accounts=accounts,
        cards=cards,
        people=people,
        agent_ids=ids("Agent", a_hi, a_lo),
        agent_of=agent_of,
        internal_of=internal_of,
        beneficiaries_of=bene_of,
        own_external=own_external,
        home_internal=home_internal,
        usd_internal=usd_internal,
        account_index={a: i for i, a in enumerate(accounts.ids)},
        customer_index={c: i for i, c in enumerate(customers.ids)},
        platform_customer_index={c: i for i, c in enumerate(customers.platform_ids)},
        card_index={c: i for i, c in enumerate(cards.ids)},
        platform_internal=platform_internal,
    )


def _before(rng: np.random.Generator, start_us: int, n: int, max_days: float) -> np.ndarray:
    """Times between `max_days` and one day before `start_us`, at whole milliseconds."""
    days = rng.uniform(1.0, max_days, n)
    return (start_us - (days * US_PER_DAY).astype(np.int64)) // 1000 * 1000


def _customers(rng: np.random.Generator, n: int, start_us: int) -> Customers:
    hi, lo = new_uuids(rng, n)
    created = _before(rng, start_us, n, 730)
    order = _order(created, hi, lo)
    hi, lo, created = hi[order], lo[order], created[order]
    region = pick_weighted(rng, np.array([r[2] for r in REGIONS]), n)
    region[0] = 0  # the oldest customer is in the US: scenarios need a USD bank customer
    kind = (rng.random(n) < 0.2).astype(np.int64)
    home = np.array([CURRENCY_INDEX[REGIONS[r][1]] for r in region], dtype=np.int64)
    # activity: heavy-tailed, businesses more active
    weight = (rng.pareto(1.6, n) + 1.0) * np.where(kind == 1, 3.0, 1.0)
    kyc = pick_weighted(rng, np.array([93.0, 3, 1.5, 1, 1.5]), n)
    kyc[0] = 0
    updated = created + (rng.random(n) * (start_us - created)).astype(np.int64) // 1000 * 1000
    deleted = rng.random(n) < 0.01
    deleted[0] = False
    customers = Customers(
        hi=hi, lo=lo, kind=kind, region=region, home=home, created=created, updated=updated,
        kyc=kyc, deleted=deleted,
        first=rng.integers(0, len(FIRST_NAMES), n), last=rng.integers(0, len(LAST_NAMES), n),
        weight=np.where(deleted | (kyc != 0), 0.0, weight),
    )  # fmt: skip
    customers.ids = ids("Customer", hi, lo)
    customers.platform_ids = [f"sbx-cus-{(low >> 20) & 0xFFFFFFFFFF:010x}" for low in lo.tolist()]
    if len(set(customers.platform_ids)) != n:  # astronomically rare; keep ids unique regardless
        customers.platform_ids = [f"{p}-{i}" for i, p in enumerate(customers.platform_ids)]
    return customers


def _accounts(
    rng: np.random.Generator,
    customers: Customers,
    people: People,
    start_us: int,
    profile: Profile = DEFAULT,
) -> tuple[Accounts, ItemsByOwner, ItemsByOwner, np.ndarray, np.ndarray, np.ndarray]:
    n = len(customers)
    usd, usdc, btc = CURRENCY_INDEX["USD"], CURRENCY_INDEX["USDC"], CURRENCY_INDEX["BTC"]
    owner: list[np.ndarray] = []
    currency: list[np.ndarray] = []
    kind: list[np.ndarray] = []
    external: list[np.ndarray] = []
    third: list[np.ndarray] = []
    cust = np.arange(n)

    def add(who: np.ndarray, cur: np.ndarray, k: np.ndarray, ext: bool, third_party: bool) -> None:
        owner.append(who)
        currency.append(cur)
        kind.append(k)
        external.append(np.full(len(who), ext))
        third.append(np.full(len(who), third_party))

    holders = internal_holders(rng, customers, profile)  # home fiat
    add(holders, customers.home[holders], np.zeros(len(holders), np.int64), False, False)
    if profile.extra_internal:  # extra USD, embedded wallets, crypto
        extra_usd = cust[(customers.home != usd) & (rng.random(n) < 0.35)]
        zeros = np.zeros(len(extra_usd), np.int64)
        add(extra_usd, np.full(len(extra_usd), usd), zeros, False, False)
        wallet = cust[rng.random(n) < 0.12]
        add(wallet, np.full(len(wallet), usdc), np.full(len(wallet), 2), False, False)
        crypto = cust[rng.random(n) < 0.08]
        add(crypto, np.full(len(crypto), btc), np.ones(len(crypto), np.int64), False, False)
    home_option = np.array([HOME_OPTION[REGIONS[r][1]] for r in range(len(REGIONS))])[
        customers.region
    ]
    add(cust, customers.home, home_option, True, False)  # own bank account
    n_bene = np.minimum(rng.poisson(profile.beneficiaries, n), 4)
    bene_owner = np.repeat(cust, n_bene)
    bene_option = pick_weighted(rng, OPTION_POPULARITY, len(bene_owner))
    add(
        bene_owner,
        np.array(
            [CURRENCY_INDEX[RECEIVE_OPTIONS[o].currency] for o in bene_option], dtype=np.int64
        ),
        bene_option,
        True,
        True,
    )
    # the platform's own accounts: an internal account per home currency and crypto, two banks
    platform_currencies = np.array(
        sorted({CURRENCY_INDEX[r[1]] for r in REGIONS} | {usdc, btc}), dtype=np.int64
    )
    pk = np.where(platform_currencies == usdc, 2, np.where(platform_currencies == btc, 1, 0))
    add(np.full(len(platform_currencies), NO_ROW), platform_currencies, pk, False, False)
    banks = np.array([HOME_OPTION["USD"], HOME_OPTION["EUR"]])
    add(np.full(2, NO_ROW), np.array([usd, CURRENCY_INDEX["EUR"]]), banks, True, False)

    owner_a = np.concatenate(owner)
    m = len(owner_a)
    hi, lo = new_uuids(rng, m)
    owner_created = np.where(
        owner_a >= 0, customers.created[np.maximum(owner_a, 0)], start_us - 800 * US_PER_DAY
    )
    created = (
        owner_created
        + (
            rng.random(m) * np.minimum(start_us - US_PER_DAY - owner_created, 30 * US_PER_DAY)
        ).astype(np.int64)
        // 1000
        * 1000
    )
    order = _order(created, hi, lo)
    ext = np.concatenate(external)[order]
    kind_a = np.concatenate(kind)[order]
    cur_a = np.concatenate(currency)[order]
    third_a = np.concatenate(third)[order]
    owner_a = owner_a[order]
    wallet_option = np.isin(
        kind_a,
        [
            i
            for i, o in enumerate(RECEIVE_OPTIONS)
            if o.account_type.endswith(("WALLET", "LIGHTNING"))
        ],
    )
    status = np.where(ext & wallet_option & (rng.random(m) < 0.3), 2, 0)
    status = np.where(ext & (rng.random(m) < 0.02), 1, status)
    person = np.where(third_a, rng.integers(0, len(people), m), NO_ROW)
    balance_usd = rng.lognormal(np.log(2_000.0), 1.3, m)
    accounts = Accounts(
        hi=hi[order], lo=lo[order], external=ext, owner=owner_a, currency=cur_a, kind=kind_a,
        third_party=third_a, status=status, person=person, created=created[order],
        balance=np.where(ext, 0, to_minor(balance_usd, cur_a)),
    )  # fmt: skip
    accounts.ids = [
        f"{'ExternalAccount' if e else 'InternalAccount'}:{uuid_text(h, low)}"
        for e, h, low in zip(ext.tolist(), accounts.hi.tolist(), accounts.lo.tolist(), strict=True)
    ]
    rows = np.arange(m)
    mine = owner_a >= 0
    internal = mine & ~ext
    internal_of = ItemsByOwner.build(owner_a[internal], rows[internal], n)
    bene = mine & ext & third_a
    bene_of = ItemsByOwner.build(owner_a[bene], rows[bene], n)
    own_external = np.full(n, NO_ROW, dtype=np.int64)
    own = mine & ext & ~third_a
    own_external[owner_a[own]] = rows[own]
    usd_internal = np.full(n, NO_ROW, dtype=np.int64)
    fiat_usd = internal & (cur_a == usd) & (kind_a == 0)
    usd_internal[owner_a[fiat_usd]] = rows[fiat_usd]
    platform_internal = np.full(len(USD_PRICE), NO_ROW, dtype=np.int64)
    plat = (owner_a == NO_ROW) & ~ext
    platform_internal[cur_a[plat]] = rows[plat]
    currencies: list[set[int]] = [set() for _ in range(n)]
    for who, cur in zip(owner_a[internal].tolist(), cur_a[internal].tolist(), strict=True):
        currencies[who].add(cur)
    customers.currencies = [sorted(c) for c in currencies]
    return accounts, internal_of, bene_of, own_external, usd_internal, platform_internal


def _cards(
    rng: np.random.Generator,
    customers: Customers,
    accounts: Accounts,
    start_us: int,
    profile: Profile = DEFAULT,
) -> Cards:
    card_currencies = np.array(
        [CURRENCY_INDEX["USD"], CURRENCY_INDEX["EUR"], CURRENCY_INDEX["GBP"]]
    )
    eligible = np.flatnonzero(
        ~accounts.external
        & (accounts.owner >= 0)
        & (accounts.kind == 0)
        & np.isin(accounts.currency, card_currencies)
    )
    eligible = eligible[customers.kyc[accounts.owner[eligible]] == 0]
    if profile.cards_per_customer is None:
        chosen = eligible[rng.random(len(eligible)) < 0.35]
        chosen = np.concatenate([chosen, chosen[rng.random(len(chosen)) < 0.1]])
    else:
        chosen = card_accounts(rng, eligible, len(customers), profile)
    n = len(chosen)
    hi, lo = new_uuids(rng, n)
    created = (
        accounts.created[chosen] + (rng.random(n) * US_PER_DAY * 20).astype(np.int64) // 1000 * 1000
    )
    created = np.minimum(created, start_us - US_PER_DAY)
    order = _order(created, hi, lo)
    chosen, hi, lo, created = chosen[order], hi[order], lo[order], created[order]
    state = pick_weighted(rng, np.array([1.0, 2, 84, 7, 6]), n)
    # state changes of frozen and closed cards happened during the generated period
    updated = np.where(
        state >= 3,
        start_us + (rng.random(n) * 150 * US_PER_DAY).astype(np.int64) // 1000 * 1000,
        created,
    )
    closed_by_issuer = (state == 4) & (rng.random(n) < 0.15)
    cards = Cards(
        hi=hi, lo=lo, holder=accounts.owner[chosen], account=chosen, currency=accounts.currency[chosen],
        state=state, closed_by_issuer=closed_by_issuer, visa=rng.random(n) < 0.6,
        last4=rng.integers(0, 10_000, n), expires=rng.integers(2027, 2031, n) * 100 + rng.integers(1, 13, n),
        created=created, updated=updated,
        max_spend=[None if r < 0.7 else int(v) for r, v in zip(rng.random(n).tolist(), to_minor(np.full(n, 2_500.0), accounts.currency[chosen]).tolist(), strict=True)],
        funding=[[] if s == 4 else [int(a)] for s, a in zip(state.tolist(), chosen.tolist(), strict=True)],
    )  # fmt: skip
    cards.ids = ids("Card", hi, lo)
    return cards
