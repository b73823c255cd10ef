"""Wire shapes of transactions and quotes: each row rendered once to JSON text, and kept.

A row's text depends on its columns and on the clock only through its planned events (`t1`,
`t2`, `t3`; a card's first 30 seconds), so it is kept until the clock reaches the next of them
or the row changes through the interface (`forget`). The world renders every row when it is
generated; a page is then a gather of kept texts, which the wire layer writes as they are
(`WireRows`), and only rows whose text went stale are rendered again.

Rows are rendered in batches, a column at a time, never a dict at a time: columns are gathered
with one numpy fancy-index each; ids, references and timestamps are formatted as digit matrices,
numbers by one orjson call; what rows share (accounts, customers, cards, people, currencies,
enums) is encoded once per world. Each row is then one join of its type's template with its
column values; the template's optional members take `,"name":value` or nothing. The text is
what orjson writes for the interface's variant, member for member and in the same order;
`transactions` decodes it for the callers that want values (ground truth, quotes), so the list
endpoint and the ground truth cannot drift apart.

References (`reconciliationInstructions.reference`) and quote ids are derived from the
transaction's UUID and map back to it, so both can be looked up without an index of their own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any, SupportsIndex, cast

import numpy as np
import orjson

from ..currencies import CHANNELS, CODES, N_RAILS, QUOTE_TTL_S, REGIONS, currency_wire
from ..generate.entities import NO_ROW, Entities
from ..generate.transactions import (
    CARD,
    CARD_EXCEPTION,
    CARD_TIP,
    COLUMNS,
    COUNTERPARTY_INFO,
    DEST_UMA,
    IN_FAILURES,
    INCOMING,
    MEMOS,
    MERCHANTS,
    NEVER,
    NONE8,
    OUT_FAILURES,
    OUTGOING,
    PENDING_REASONS,
    RAIL_MODES,
    REFUND_REASONS,
    REFUND_STATUSES,
    SRC_FUNDING,
    SRC_UMA,
    ST,
    STATUSES,
    multipliers,
)
from .entities import SANDBOX_DOMAIN, EntityViews, handle, iso
from .store import TxStore

_REFERENCE_MASK = 0x5EED_CAFE_F00D_D00D
_QUOTE_MASK_HI = 0x3C5A_96E1_7D2B_0F48 & 0xFFFF_FFFF_FFFF_0FFF  # keeps the version nibble
_QUOTE_MASK_LO = 0x2E4D_6A8B_1C3F_5E70 & 0x3FFF_FFFF_FFFF_FFFF  # keeps the variant bits
#: Payouts to external crypto wallets report `onChainTransaction` instead of a reference.
ON_CHAIN = {
    CHANNELS.index("SPARK"): "SPARK",
    CHANNELS.index("SOLANA"): "SOLANA",
    CHANNELS.index("BASE"): "BASE",
}
_ON_CHAIN_CHANNELS = np.array(sorted(ON_CHAIN))
_ON_CHAIN_TABLE = np.isin(np.arange(256), _ON_CHAIN_CHANNELS)
_US = 1_000_000


def hi_of_reference(reference: str) -> int | None:
    """The UUID high half of the transaction whose reference this is: a reference is "SBX-" and
    16 upper-case hex digits of that half masked (see `_reference_hex`)."""
    if len(reference) != 20 or not reference.startswith("SBX-"):
        return None
    try:
        return int(reference[4:], 16) ^ _REFERENCE_MASK
    except ValueError:
        return None


def quote_uuid(hi: Any, lo: Any) -> tuple[Any, Any]:
    """The quote's UUID halves from its transaction's, and back (an involution); ints or
    uint64 arrays."""
    if isinstance(hi, np.ndarray):
        return hi ^ np.uint64(_QUOTE_MASK_HI), lo ^ np.uint64(_QUOTE_MASK_LO)
    return hi ^ _QUOTE_MASK_HI, lo ^ _QUOTE_MASK_LO


def shows_reference(kind: np.ndarray, status: np.ndarray, channel: np.ndarray) -> np.ndarray:
    """Which rows show `reconciliationInstructions.reference` (what the reference filter sees)."""
    return (
        (kind != CARD)
        & ~((kind == INCOMING) & (status == ST["CREATED"]))
        & ~((kind == OUTGOING) & np.isin(channel, _ON_CHAIN_CHANNELS))
    )


class WireRows(list):  # type: ignore[type-arg]
    """Transactions rendered to JSON text, as the list a page's `data` is.

    It holds one `orjson.Fragment` per row, which the wire layer's `orjson.dumps` copies as it
    is: encoding a page costs a memcpy, not a walk over dicts. Python code that reads the rows
    instead (tests calling `dispatch` directly, the corrupt-record fault) sees them as dicts:
    its first access decodes them in place, and from then on this is a plain list of dicts.
    """

    _texts: list[bytes] | None = None

    @classmethod
    def of(cls, texts: list[bytes]) -> WireRows:
        rows = cls(map(orjson.Fragment, texts))
        rows._texts = texts
        return rows

    def decoded(self) -> WireRows:
        if self._texts is not None:
            list.__setitem__(self, slice(None), decode(self._texts))
            self._texts = None
        return self

    def __iter__(self) -> Iterator[Any]:
        return list.__iter__(self.decoded())

    def __reversed__(self) -> Iterator[Any]:
        return list.__reversed__(self.decoded())

    def __getitem__(self, index: Any) -> Any:
        return list.__getitem__(self.decoded(), index)

    def __contains__(self, item: object) -> bool:
        return list.__contains__(self.decoded(), item)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, WireRows):
            other.decoded()
        return list.__eq__(self.decoded(), other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Any) -> Any:
        return list(self) + list(other)

    def __radd__(self, other: Any) -> Any:
        return list(other) + list(self)

    def __repr__(self) -> str:
        return list.__repr__(self.decoded())

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (list, (list(self),))

    def copy(self) -> list[Any]:
        return list(self)

    def index(self, *args: Any) -> int:
        return list.index(self.decoded(), *args)

    def count(self, value: Any) -> int:
        return list.count(self.decoded(), value)


def decode(texts: list[bytes]) -> list[dict[str, Any]]:
    """JSON texts of records as their values, in one orjson call."""
    return orjson.loads(b"[" + b",".join(texts) + b"]") if texts else []


class TxViews:
    """Renders transaction rows and quotes of a store."""

    def __init__(self, store: TxStore, ents: Entities, views: EntityViews) -> None:
        self.store = store
        self.e = ents
        self.views = views
        self.descriptions: dict[int, str | None] = {}  # descriptions of quote requests (None: none)
        self._shared = _Shared(ents, views)
        self._people_by_uma: dict[str, int] | None = None
        # each row's text, valid while the clock is before `_until[row]`
        self._texts: list[bytes] = []
        self._until = np.zeros(0, dtype=np.int64)

    def transactions(self, rows: np.ndarray, now: int) -> list[dict[str, Any]]:
        """The rows as JSON values (the list endpoint's records, decoded)."""
        return decode(self.texts(rows, now))

    def wire(self, rows: np.ndarray, now: int) -> WireRows:
        """The rows as a page's `data`, pre-encoded."""
        return WireRows.of(self.texts(rows, now))

    def texts(self, rows: np.ndarray, now: int) -> list[bytes]:
        """The JSON text of each row at clock time `now`, in the order of `rows`: kept texts
        where still valid, the others rendered now (and kept)."""
        rows = np.asarray(rows, dtype=np.int64)
        self._grow()
        stale = rows[self._until[rows] <= now]
        if len(stale):
            self.render(np.unique(stale), now)
        if len(rows) < 2:
            return [self._texts[row] for row in rows.tolist()]
        return list(itemgetter(*rows.tolist())(self._texts))

    def render(self, rows: np.ndarray, now: int) -> None:
        """Render `rows` (unique) at `now` and keep their texts until the clock reaches their next
        planned event: the text is a function of the row's columns and of the clock only
        through `t1`, `t2`, `t3` (and a card's first 30 seconds), and columns change only at
        those events or through `forget`-ting changes."""
        self._grow()
        for first in range(0, len(rows), _BATCH):
            part = rows[first : first + _BATCH]
            texts = self._render(part, now)
            if len(part) > 1 and part[-1] - part[0] == len(part) - 1:
                self._texts[int(part[0]) : int(part[-1]) + 1] = texts
            else:
                for row, text in zip(part.tolist(), texts, strict=True):
                    self._texts[row] = text
            c = self.store.gather(part, ("kind", "created", "t1", "t2", "t3"))
            pull_settles = np.where(c["kind"] == CARD, c["created"] + _PULL_PENDING_US, NEVER)
            events = np.stack([c["t1"], c["t2"], c["t3"], pull_settles])
            self._until[part] = np.where(events > now, events, NEVER).min(axis=0)

    def _grow(self) -> None:
        """Make room for rows the store appended (unrendered)."""
        grown = self.store.n - len(self._texts)
        if grown > 0:
            self._texts += [b""] * grown
            self._until = np.concatenate([self._until, np.full(grown, _UNRENDERED)])

    def person_by_uma(self, address: str) -> int | None:
        """The sandbox person (a counterparty) whose UMA address this is, or None."""
        if self._people_by_uma is None:
            self._people_by_uma = {
                orjson.loads(text): i for i, text in enumerate(self._shared.umas.tolist())
            }
        return self._people_by_uma.get(address)

    def forget(self, row: int) -> None:
        """Drop the kept text of a row that changed through the interface."""
        if row < len(self._until):
            self._until[row] = _UNRENDERED

    def describe(self, row: int, description: str | None) -> None:
        """Set the description of a quote's row (None: it has none)."""
        self.descriptions[row] = description
        self.forget(row)

    def _render(self, rows: np.ndarray, now: int) -> list[bytes]:
        """The JSON text of each row, in the order of `rows`."""
        if not len(rows):
            return []
        kind = self.store.col("kind")[rows]
        order = np.argsort(kind, kind="stable")  # each type's rows become one slice
        first_out, first_card = np.searchsorted(kind[order], [OUTGOING, CARD]).tolist()
        batch = _Batch(rows[order], self.store.gather(rows[order], _GATHERED), now)
        texts = self._payments(batch.part(0, first_out), INCOMING)
        texts += self._payments(batch.part(first_out, first_card), OUTGOING)
        texts += self._cards(batch.part(first_card, len(rows)))
        if len(rows) == 1:
            return texts
        return list(itemgetter(*np.argsort(order).tolist())(texts))

    # --- payments ---------------------------------------------------------------------------

    def _payments(self, p: _Batch, kind: int) -> list[bytes]:
        """The texts of INCOMING or OUTGOING rows (all of one type)."""
        n, c, at, sh = len(p.rows), p.c, p.at, self._shared
        if not n:
            return []
        incoming = kind == INCOMING
        status, channel, hi, lo = c["status"], c["channel"], c["hi"], c["lo"]
        completed, failed = status == _COMPLETED, status == _FAILED
        on_chain = _ON_CHAIN_TABLE[channel]
        funding = c["source_kind"] == SRC_FUNDING
        refs = _reference_hex(hi)

        sources = sh.sources(c, funding, incoming)
        dest_uma = c["dest_kind"] == DEST_UMA
        destinations = sh.destinations(c, dest_uma)
        if incoming:
            chained = funding & completed & on_chain & (channel >= N_RAILS)
            _add_on_chain(sources, chained, hi, lo, channel)
        else:
            _add_on_chain(destinations, ~dest_uma & completed & on_chain, hi, lo, channel)

        if incoming:
            sent, received, fees, fx = _numbers(c["sent"], c["received"], c["fees"], c["fx"])
        else:
            sent, received, fees, fx, *rates = _numbers(
                c["sent"], c["received"], c["fees"], c["fx"], c["platform_fee"], c["cpty_mult"],
                c["cpty_fee"], c["mult"], c["fixed_fee"], c["var_rate"], c["var_fee"],
                np.where(c["timeline"] < 0, cast(Any, None), c["timeline"]),
            )  # fmt: skip
        slots: list[Sequence[bytes | None]] = [
            _uuids(hi, lo),
            _STATUS[status].tolist(),
            sources,
            destinations,
            sh.customers[c["customer"]].tolist(),
            sent,
            _CURRENCY[c["send_cur"]].tolist(),
            received,
            _CURRENCY[c["recv_cur"]].tolist(),
            fx,
            fees,
        ]
        if not incoming:
            slots += rates[:7]
            slots += [
                _uuids(*quote_uuid(hi, lo)),
                _RAIL[channel].tolist(),
                _RAIL_MODE[c["rail_mode"]].tolist(),
                [b"null" if t is None else b'"%s"' % t for t in at["expected"]],
                rates[7],
            ]
        slots += [
            at["created"],
            at["updated"],
            _optional(completed, b',"settledAt":"%s"', at["t2"]),
            self._descriptions(p, lo),
            _optional(
                (status != _CREATED) if incoming else ~on_chain,
                b',"reconciliationInstructions":{"reference":"SBX-%s"}',
                refs,
            ),
        ]
        if not incoming:
            slots.append(self._payment_instructions(p, funding, refs))
        reasons = _IN_FAILURE if incoming else _OUT_FAILURE
        slots += [
            reasons[np.where(failed, c["failure"], NONE8)].tolist(),
            _refunds(p, failed & (c["refund_final"] != NONE8), refs),
            _PENDING[np.where(_WAITING[status], c["pending_reason"], NONE8)].tolist(),
            sh.agents[c["agent"]].tolist(),
            _optional(c["receipt"] != 0, b',"receiptDeliveryConfirmedAt":"%s"', at["receipt"]),
            self._counterparties(p, kind),
        ]
        return (_INCOMING if incoming else _OUTGOING).fill(slots)

    def _descriptions(self, p: _Batch, lo: np.ndarray) -> list[bytes]:
        memo = p.c["memo"]
        out = _MEMO[memo].tolist()
        numbers = (1000 + lo % np.uint64(9000)).tolist()
        for i in np.flatnonzero(_MEMO_NUMBERED[memo]).tolist():
            out[i] %= numbers[i]
        if self.descriptions:
            for i, row in enumerate(p.rows.tolist()):
                if row in self.descriptions:
                    text = self.descriptions[row]
                    out[i] = b"" if text is None else b',"description":' + orjson.dumps(text)
        return out

    def _payment_instructions(
        self, p: _Batch, funding: np.ndarray, refs: list[bytes]
    ) -> list[bytes]:
        """`,"paymentInstructions":[...]` of the outgoing rows funded in real time."""
        out = [b""] * len(p.rows)
        for i in np.flatnonzero(funding).tolist():
            info = self.views.deposit_instructions(
                int(p.c["send_cur"][i]), "SBX-" + refs[i].decode(), int(p.c["hi"][i]), platform=True
            )
            out[i] = b',"paymentInstructions":[%s]' % orjson.dumps(info)
        return out

    def _counterparties(self, p: _Batch, kind: int) -> list[bytes]:
        """`,"counterpartyInformation":{...}` of the rows flagged to show it: the beneficiary
        (the person paid or paying, else the receiving account's holder) and their country."""
        out = [b""] * len(p.rows)
        picks = np.flatnonzero(p.c["flags"] & COUNTERPARTY_INFO)
        if not len(picks):
            return out
        sh, e = self._shared, self.e
        person, receiver = p.c["person"][picks], p.c["receiver"][picks]
        named = person != NO_ROW
        names = sh.people[person]
        holders = np.flatnonzero(~named)
        if len(holders):
            names[holders] = sh.holder_names.texts(receiver[holders])
        countries = np.where(
            named,
            _REGION[e.people.country[person]],
            _REGION[e.customers.region[p.c["customer"][picks]]],
        ).tolist()
        names = names.tolist()
        if kind == INCOMING:
            texts = _format(_COUNTERPARTY_IN, names, countries, countries)
        else:
            uma = p.c["dest_kind"][picks].tolist()
            purposes = [_FAMILY_SUPPORT if k == DEST_UMA else _GOODS for k in uma]
            texts = _format(_COUNTERPARTY_OUT, names, countries, purposes)
        for i, text in zip(picks.tolist(), texts, strict=True):
            out[i] = text
        return out

    # --- cards ------------------------------------------------------------------------------

    def _cards(self, p: _Batch) -> list[bytes]:
        n, c, at, sh, now = len(p.rows), p.c, p.at, self._shared, p.now
        if not n:
            return []
        flags, auth, clear1, clear2 = c["flags"], c["sent"], c["clear1"], c["clear2"]
        cleared1, cleared2, refunded = c["t1"] <= now, c["t2"] <= now, c["t3"] <= now
        settled = np.where(cleared1, clear1, 0) + np.where(cleared2, clear2, 0)
        tip_pull = (flags & CARD_TIP != 0) & cleared1
        failed_pull = (flags & CARD_EXCEPTION != 0) & cleared1
        pulled = np.where(failed_pull, 0, auth + np.where(tip_pull, clear1 - auth, 0))
        pending = (now < c["created"] + _PULL_PENDING_US) & (flags & CARD_EXCEPTION == 0)
        refund = np.where(refunded, c["refund_amount"], 0)
        currency = _CURRENCY[c["send_cur"]].tolist()
        authorized, settled_amount, refunded_amount, pulled_amount = _numbers(
            auth, settled, refund, pulled
        )
        slots: list[Sequence[bytes | None]] = [
            _uuids(c["hi"], c["lo"]),
            sh.cards[c["card"]].tolist(),
            sh.customers[c["customer"]].tolist(),
            _token_hex(c["lo"]),
            _STATUS[c["status"]].tolist(),
            _MERCHANT[c["merchant"]].tolist(),
            authorized,
            currency,
            _optional(
                cleared1,
                b',"settledAmount":{"amount":%s,"currency":%s}',
                list(zip(settled_amount, currency, strict=True)),
            ),
            _optional(
                refunded,
                b',"refundedAmount":{"amount":%s,"currency":%s}',
                list(zip(refunded_amount, currency, strict=True)),
            ),
            sh.accounts[c["sender"]].tolist(),
            _DIGIT[np.where(tip_pull, 2, 1)].tolist(),
            pulled_amount,
            _DIGIT[pending.astype(np.int64)].tolist(),
            _DIGIT[refunded.astype(np.int64)].tolist(),
            refunded_amount,
            _DIGIT[cleared1.astype(np.int64) + cleared2].tolist(),
            settled_amount,
            at["created"],
            _optional(cleared1, b',"lastEventAt":"%s"', at["last_event"]),
            at["created"],
            at["updated"],
        ]
        return _CARD.fill(slots)

    # --- quotes -----------------------------------------------------------------------------

    def quote(self, row: int, now: int) -> dict[str, Any]:
        """The quote behind an OUTGOING row (its id maps to the transaction's)."""
        tx = self.transactions(np.array([row]), now)[0]
        c = self.store.gather(np.array([row]))
        channel = int(c["channel"][0])
        source = tx["source"]
        if source["sourceType"] == "ACCOUNT":
            source = {
                "sourceType": "ACCOUNT",
                "accountId": source["accountId"],
                "customerId": tx["customerId"],
            }
        destination = {k: v for k, v in tx["destination"].items() if k != "onChainTransaction"}
        if destination["destinationType"] == "ACCOUNT":
            destination.pop("currency", None)
            if tx["railSelectionMode"] == "MANUAL":
                destination["paymentRail"] = tx["paymentRail"]
        expires = int(c["created"][0]) + int(QUOTE_TTL_S[channel]) * _US
        out: dict[str, Any] = {
            "id": tx["quoteId"],
            "status": tx["status"],
            "createdAt": tx["createdAt"],
            "expiresAt": iso(np.array([expires]))[0],
            "source": source,
            "destination": destination,
            "sendingCurrency": tx["sentAmount"]["currency"],
            "receivingCurrency": tx["receivedAmount"]["currency"],
            "totalSendingAmount": tx["sentAmount"]["amount"],
            "totalReceivingAmount": tx["receivedAmount"]["amount"],
            "exchangeRate": tx["exchangeRate"],
            "feesIncluded": tx["fees"],
            "platformFeesIncluded": tx["platformFees"],
            "transactionId": tx["id"],
            "rateDetails": tx["rateDetails"],
        }
        for optional in ("paymentInstructions", "counterpartyInformation"):
            if optional in tx:
                out[optional] = tx[optional]
        return out


# --- a batch of rows --------------------------------------------------------------------------

_GATHERED = tuple(name for name in COLUMNS if name not in ("final", "cancel_by"))
_BATCH = 4096  # rows rendered per call: numpy's per-call costs vanish, the slots stay in cache
_UNRENDERED = np.iinfo(np.int64).min  # `_until` of a row without a valid text
_PULL_PENDING_US = 30 * _US  # a card authorization's pull is pending for its first 30 seconds
_COMPLETED, _FAILED, _CREATED = ST["COMPLETED"], ST["FAILED"], ST["CREATED"]


class _Batch:
    """Rows rendered together (grouped by type) and their columns, with what is computed for
    all of them at once: timestamps (texts, None where not shown) and rate multipliers."""

    def __init__(
        self,
        rows: np.ndarray,
        c: dict[str, np.ndarray],
        now: int,
        at: dict[str, list[bytes | None]] | None = None,
    ) -> None:
        self.rows, self.now = rows, now
        if at is None:
            t1, t2, t3, status = c["t1"], c["t2"], c["t3"], c["status"]
            last_event = np.maximum.reduce([np.where(t <= now, t, 0) for t in (t1, t2, t3)])
            updated = np.maximum.reduce([c["created"], c["touched"], last_event])
            failed = status == _FAILED
            at = _stamps(
                {
                    "created": (c["created"], None),
                    "updated": (updated, None),
                    "t2": (t2, (status == _COMPLETED) | failed),
                    "t3": (t3, failed & (t3 <= now)),
                    "expected": (c["expected"], c["expected"] != NEVER),
                    "receipt": (c["receipt"], c["receipt"] != 0),
                    "last_event": (last_event, (c["kind"] == CARD) & (t1 <= now)),
                }
            )
            mult, cpty = multipliers(c["send_cur"], c["recv_cur"], c["fx"], c["var_rate"])
            c = c | {"mult": mult, "cpty_mult": cpty}
        self.c, self.at = c, at

    def part(self, a: int, b: int) -> _Batch:
        """The rows [a, b) of this batch."""
        return _Batch(
            self.rows[a:b],
            {name: col[a:b] for name, col in self.c.items()},
            self.now,
            {name: texts[a:b] for name, texts in self.at.items()},
        )


def _add_on_chain(
    texts: list[bytes], picked: np.ndarray, hi: np.ndarray, lo: np.ndarray, channel: np.ndarray
) -> None:
    """Close the objects `texts[i]` where `picked` with their `onChainTransaction`."""
    for i in np.flatnonzero(picked).tolist():
        digest = hashlib.sha256(int(hi[i]).to_bytes(8, "big") + int(lo[i]).to_bytes(8, "big"))
        network = ON_CHAIN[int(channel[i])].encode()
        texts[i] = texts[i][:-1] + _ON_CHAIN_TAIL % (digest.hexdigest().encode(), network)


def _refunds(p: _Batch, picked: np.ndarray, refs: list[bytes]) -> list[bytes]:
    """`,"refund":{...}` of the rows where `picked`."""
    out = [b""] * len(picked)
    for i in np.flatnonzero(picked).tolist():
        reason = _REFUND_REASON[p.c["refund_reason"][i]]
        if p.c["t3"][i] <= p.now:
            status = _REFUND_STATUS[p.c["refund_final"][i]]
            out[i] = _REFUND_DONE % (refs[i], p.at["t2"][i], p.at["t3"][i], status, reason)
        else:
            out[i] = _REFUND_PENDING % (refs[i], p.at["t2"][i], reason)
    return out


def _optional(picked: np.ndarray, template: bytes, values: list[Any]) -> list[bytes]:
    """`template % values[i]` where `picked`, b"" elsewhere."""
    out = [b""] * len(picked)
    for i in np.flatnonzero(picked).tolist():
        out[i] = template % values[i]
    return out


# --- what rows share --------------------------------------------------------------------------


class _Encoded(dict[int, bytes]):
    """JSON texts by entity row, each made by `make` the first time it is asked for."""

    def __init__(self, make: Callable[[int], bytes]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, key: int) -> bytes:
        got = self[key] = self.make(key)
        return got

    def texts(self, keys: np.ndarray) -> list[bytes]:
        return list(map(self.__getitem__, keys.tolist()))


def _format(template: bytes, *columns: Any) -> list[bytes]:
    """`template % row` for the rows of equally long columns."""
    return list(map(template.__mod__, zip(*columns, strict=True)))


class _Shared:
    """What many rows show, encoded once: accounts, customers, cards, agents and people by
    entity row (names derived with a seeded generator, when first shown)."""

    def __init__(self, ents: Entities, views: EntityViews) -> None:
        customers, accounts, people = ents.customers, ents.accounts, ents.people
        ids = [_json(i) for i in accounts.ids]
        currencies = accounts.currency.tolist()
        self.accounts = np.array(ids, dtype=object)
        self.account_currency = accounts.currency
        self.account_sources = np.array(
            [_ACCOUNT_SOURCE % (i, _CODE[k]) for i, k in zip(ids, currencies, strict=True)],
            dtype=object,
        )
        self.account_destinations = np.array(
            [_ACCOUNT_DESTINATION % (i, _CODE[k]) for i, k in zip(ids, currencies, strict=True)],
            dtype=object,
        )
        self.cards = np.array([_json(i) for i in ents.cards.ids], dtype=object)
        self.customer_ids = np.array([_json(i) for i in customers.ids], dtype=object)
        self.customers = np.array(
            [
                b'"customerId":%s,"platformCustomerId":%s' % (i, _json(p))
                for i, p in zip(self.customer_ids.tolist(), customers.platform_ids, strict=True)
            ],
            dtype=object,
        )
        self.customer_names = _Encoded(lambda k: _json(views.customer_name(k)))
        # `,"agentId":...` by agent; the last entry, at index NO_ROW (-1), for rows of none
        self.agents = np.array(
            [b',"agentId":' + _json(a) for a in ents.agent_ids] + [b""], dtype=object
        )
        self.people = np.array(
            [_json(people.name(i)) for i in range(len(people))] + [b""], dtype=object
        )
        self.umas = np.array(
            [
                _json(f"${handle(int(first), int(last), i)}@uma.{SANDBOX_DOMAIN}")
                for i, (first, last) in enumerate(zip(people.first, people.last, strict=True))
            ],
            dtype=object,
        )
        self.holder_names = _Encoded(lambda account: _json(views.holder_name(account)))

    def sources(self, c: dict[str, np.ndarray], funding: np.ndarray, incoming: bool) -> list[bytes]:
        """The `source` of payment rows, without `onChainTransaction`."""
        uma = c["source_kind"] == SRC_UMA
        code = _CODES[c["send_cur"]]
        out = self._accounts(
            self.account_sources, _ACCOUNT_SOURCE, ~uma & ~funding, c["sender"], c["send_cur"]
        )
        if uma.any():
            at = np.flatnonzero(uma)
            out[at] = _format(_UMA_SOURCE, self.umas[c["person"][at]], code[at])
        if funding.any():
            at = np.flatnonzero(funding)
            customer = c["customer"][at]
            if incoming:
                out[at] = _format(
                    _INCOMING_FUNDING,
                    code[at],
                    self.customer_ids[customer],
                    self.customer_names.texts(customer),
                    _FUNDING_RAIL[c["channel"][at]],
                )
            else:
                out[at] = _format(_OUTGOING_FUNDING, code[at], self.customer_ids[customer])
        return out.tolist()

    def destinations(self, c: dict[str, np.ndarray], uma: np.ndarray) -> list[bytes]:
        """The `destination` of payment rows, without `onChainTransaction`."""
        out = self._accounts(
            self.account_destinations, _ACCOUNT_DESTINATION, ~uma, c["receiver"], c["recv_cur"]
        )
        if uma.any():
            at = np.flatnonzero(uma)
            out[at] = _format(
                _UMA_DESTINATION, self.umas[c["person"][at]], _CODES[c["recv_cur"][at]]
            )
        return out.tolist()

    def _accounts(
        self,
        per_account: np.ndarray,
        template: bytes,
        picked: np.ndarray,
        account: np.ndarray,
        currency: np.ndarray,
    ) -> np.ndarray:
        """An object array with the account objects of the rows where `picked`: encoded ones
        where the row's currency is its account's, else formatted now."""
        account = np.where(picked, account, 0)
        own = picked & (currency == self.account_currency[account])
        out: np.ndarray = np.where(own, per_account[account], cast(Any, None))
        other = np.flatnonzero(picked & ~own)
        if len(other):
            out[other] = _format(template, self.accounts[account[other]], _CODES[currency[other]])
        return out


# --- formatting -------------------------------------------------------------------------------


def _table(texts: list[bytes | None], size: int = 256) -> np.ndarray:
    """An object array of `texts` by code, b"" past them (NONE8 and other absent codes)."""
    out = np.full(size, b"", dtype=object)
    out[: len(texts)] = texts
    return out


def _json(value: Any) -> bytes:
    """orjson's text of a value, in bytes of its own size: orjson's keeps its 4 KiB buffer,
    too much for what is kept."""
    return bytes(memoryview(orjson.dumps(value)))


def _numbers(*columns: np.ndarray) -> list[list[bytes]]:
    """orjson's text of each value (an int, a float in its shortest round-trip form, or None)
    of equally long columns, in one call."""
    n = len(columns[0])
    if not n:
        return [[] for _ in columns]
    values: list[Any] = []
    for column in columns:  # each column keeps its type: ints stay ints
        values += column.tolist()
    texts = orjson.dumps(values)[1:-1].split(b",")
    return [texts[k * n : (k + 1) * n] for k in range(len(columns))]


_STATUS = _table([s.encode() for s in STATUSES])
_CODE = [_json(code) for code in CODES]
_CODES = np.array(_CODE, dtype=object)
_ACCOUNT_SOURCE = b'{"sourceType":"ACCOUNT","accountId":%s,"currency":%s}'
_ACCOUNT_DESTINATION = b'{"destinationType":"ACCOUNT","accountId":%s,"currency":%s}'
_UMA_SOURCE = b'{"sourceType":"UMA_ADDRESS","umaAddress":%s,"currency":%s}'
_UMA_DESTINATION = b'{"destinationType":"UMA_ADDRESS","umaAddress":%s,"currency":%s}'
_OUTGOING_FUNDING = b'{"sourceType":"REALTIME_FUNDING","currency":%s,"customerId":%s}'
_INCOMING_FUNDING = (
    b'{"sourceType":"REALTIME_FUNDING","currency":%s,"customerId":%s,"accountHolderName":%s%s}'
)
#: what an incoming real-time funding shows of its channel: a bank rail, or nothing
_FUNDING_RAIL = _table(
    [
        b',"bankName":"Paylens Sandbox Partner Bank","paymentRail":' + _json(name)
        if ch < N_RAILS
        else b""
        for ch, name in enumerate(CHANNELS)
    ]
)
_CURRENCY = _table([_json(currency_wire(i)) for i in range(len(CODES))])
_RAIL = _table([_json(name if ch < N_RAILS else None) for ch, name in enumerate(CHANNELS)])
_RAIL_MODE = _table([_json(mode) for mode in RAIL_MODES])
_MERCHANT = _table(
    [_json({"descriptor": m.descriptor, "mcc": m.mcc, "country": m.country}) for m in MERCHANTS]
)
_MERCHANT_CODES = {m.descriptor: i for i, m in enumerate(MERCHANTS)}


def merchant_code(descriptor: str, mcc: str | None, country: str | None) -> int | None:
    """The `merchant` column code of a merchant named in a simulated authorization (codes past
    the generated merchants are kept for the process); None when the table is full."""
    if descriptor in _MERCHANT_CODES:
        return _MERCHANT_CODES[descriptor]
    code = len(_MERCHANT_CODES)
    if code >= len(_MERCHANT) - 1:  # the last code stays free
        return None
    merchant = {"descriptor": descriptor, "mcc": mcc, "country": country}
    _MERCHANT[code] = _json({k: v for k, v in merchant.items() if v is not None})
    _MERCHANT_CODES[descriptor] = code
    return code


_IN_FAILURE = _table([b',"failureReason":' + _json(f) for f in IN_FAILURES])
_OUT_FAILURE = _table([b',"failureReason":' + _json(f) for f in OUT_FAILURES])
_PENDING = _table([b',"pendingReason":' + _json(r) for r in PENDING_REASONS])
_REGION = np.array([_json(region[0]) for region in REGIONS], dtype=object)
_FAMILY_SUPPORT, _GOODS = _json("FAMILY_SUPPORT"), _json("GOODS_OR_SERVICES")
_COUNTERPARTY_IN = (
    b',"counterpartyInformation":{"FULL_NAME":%s,"COUNTRY_OF_RESIDENCE":%s,"NATIONALITY":%s}'
)
_COUNTERPARTY_OUT = (
    b',"counterpartyInformation":{"FULL_NAME":%s,"COUNTRY_OF_RESIDENCE":%s,"PURPOSE_OF_PAYMENT":%s}'
)
_ON_CHAIN_TAIL = b',"onChainTransaction":{"transactionHash":"%s","network":"%s"}}'
_WAITING = np.zeros(256, dtype=bool)
_WAITING[[ST["CREATED"], ST["PENDING"], ST["PENDING_AUTHORIZATION"], ST["PROCESSING"]]] = True
_REFUND_STATUS = [_json(s) for s in REFUND_STATUSES]
_REFUND_REASON = [_json(r) for r in REFUND_REASONS]
_REFUND_DONE = b',"refund":{"reference":"SBX-%s-RF","initiatedAt":"%s","settledAt":"%s","status":%s,"reason":%s}'
_REFUND_PENDING = (
    b',"refund":{"reference":"SBX-%s-RF","initiatedAt":"%s","status":"PENDING","reason":%s}'
)
#: `,"description":...` of each memo; numbered memos ("Invoice {n}") hold a %d for the number.
_MEMO = _table(
    [
        b',"description":'
        + (
            _json("[sandbox] " + m.replace("%", "%%")).replace(b"{n}", b"%d")
            if "{n}" in m
            else _json("[sandbox] " + m)
        )
        for m in MEMOS
    ]
)
_MEMO_NUMBERED = np.array(["{n}" in m for m in MEMOS] + [False] * (256 - len(MEMOS)))


class _Template:
    """A record's JSON with `%s` holes, filled a column at a time: each row is one `b"".join`
    of the literal pieces and its column values (all JSON text, or raw text inside quotes)."""

    def __init__(self, text: bytes) -> None:
        self.pieces = text.split(b"%s")

    def fill(self, columns: Sequence[Sequence[bytes | None]]) -> list[bytes]:
        assert len(columns) == len(self.pieces) - 1, (len(columns), len(self.pieces))
        parts: list[Any] = [repeat(self.pieces[0])]
        for column, piece in zip(columns, self.pieces[1:], strict=True):
            parts.append(column)
            if piece:
                parts.append(repeat(piece))
        return list(map(b"".join, zip(*parts, strict=False)))  # the pieces repeat forever


# One template per variant; the optional members' holes hold `,"name":value` or b"", in the
# order the interface's variants list them.
_PAYMENT_HEAD = (
    b'{"id":"Transaction:%s","status":"%s","type":"{TYPE}","direction":"{DIRECTION}",'
    b'"source":%s,"destination":%s,%s,'
    b'"sentAmount":{"amount":%s,"currency":%s},"receivedAmount":{"amount":%s,"currency":%s},'
    b'"exchangeRate":%s,"fees":%s'
)
_INCOMING = _Template(
    _PAYMENT_HEAD.replace(b"{TYPE}", b"INCOMING").replace(b"{DIRECTION}", b"CREDIT")
    + b',"createdAt":"%s","updatedAt":"%s"'
    # settledAt, description, reconciliationInstructions, failureReason, refund,
    # pendingReason, agentId, receiptDeliveryConfirmedAt, counterpartyInformation
    + b"%s%s%s%s%s%s%s%s%s}"
)
_OUTGOING = _Template(
    _PAYMENT_HEAD.replace(b"{TYPE}", b"OUTGOING").replace(b"{DIRECTION}", b"DEBIT")
    + b',"platformFees":%s,"rateDetails":{"counterpartyMultiplier":%s,"counterpartyFixedFee":%s,'
    b'"gridApiMultiplier":%s,"gridApiFixedFee":%s,"gridApiVariableFeeRate":%s,'
    b'"gridApiVariableFeeAmount":%s},"quoteId":"Quote:%s","paymentRail":%s,'
    b'"railSelectionMode":%s,"expectedSettlementAt":%s,"settlementTimelineSeconds":%s'
    b',"createdAt":"%s","updatedAt":"%s"'
    # settledAt, description, reconciliationInstructions, paymentInstructions, failureReason,
    # refund, pendingReason, agentId, receiptDeliveryConfirmedAt, counterpartyInformation
    b"%s%s%s%s%s%s%s%s%s%s}"
)
_CARD = _Template(
    b'{"type":"CARD","id":"CardTransaction:%s","cardId":%s,%s,'
    b'"issuerTransactionToken":"sbx_txn_%s","status":"%s","direction":"DEBIT","merchant":%s,'
    b'"authorizedAmount":{"amount":%s,"currency":%s}'
    b"%s%s"  # settledAmount, refundedAmount
    b',"accountId":%s,"pullSummary":{"count":%s,"totalAmount":%s,"pendingCount":%s},'
    b'"refundSummary":{"count":%s,"totalAmount":%s},'
    b'"settlementSummary":{"count":%s,"totalAmount":%s},"authorizedAt":"%s"'
    b"%s"  # lastEventAt
    b',"createdAt":"%s","updatedAt":"%s"}'
)
_DIGIT = np.array([b"%d" % k for k in range(10)], dtype=object)


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_UPPER_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_UUID_DIGITS = np.array([k for k in range(36) if k not in (8, 13, 18, 23)])


def _hex_digits(values: np.ndarray, digits: np.ndarray) -> np.ndarray:
    """The hex digits (as ASCII codes, one row per value) of uint64 values, 16 per value."""
    octets = values.astype(">u8").view(np.uint8).reshape(len(values), -1)
    nibbles = np.empty((len(values), 2 * octets.shape[1]), dtype=np.uint8)
    nibbles[:, 0::2] = octets >> 4
    nibbles[:, 1::2] = octets & 15
    return digits[nibbles]


def _uuids(hi: np.ndarray, lo: np.ndarray) -> list[bytes]:
    """Canonical texts of UUIDs given as high and low halves (as `uuid_text`, vectorised)."""
    out = np.full((len(hi), 36), ord("-"), dtype=np.uint8)
    out[:, _UUID_DIGITS] = _hex_digits(np.stack([hi, lo], axis=1), _HEX)
    return out.view("S36").ravel().tolist()


def _token_hex(lo: np.ndarray) -> list[bytes]:
    """The 10 hex digits of a card transaction's `issuerTransactionToken` (low 40 bits)."""
    digits = _hex_digits(lo & np.uint64(0xFF_FFFF_FFFF), _HEX)[:, 6:]
    return np.ascontiguousarray(digits).view("S10").ravel().tolist()


def _reference_hex(hi: np.ndarray) -> list[bytes]:
    """The 16 upper-case hex digits after "SBX-" of the rows' references."""
    masked = hi ^ np.uint64(_REFERENCE_MASK)
    return np.ascontiguousarray(_hex_digits(masked, _UPPER_HEX)).view("S16").ravel().tolist()


_DAY_ZERO = -25_567  # 1900-01-01, in days since 1970-01-01
_DAYS = 109_574  # through 2199-12-31


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """Decimal digits (ASCII codes, zero-padded to `width`) of non-negative ints, one row each."""
    return (values[:, None] // 10 ** np.arange(width - 1, -1, -1) % 10 + 48).astype(np.uint8)


def _date_table() -> np.ndarray:
    """ "YYYY-MM-DD" (ASCII codes) of the days from _DAY_ZERO on: the civil date of each day
    number by H. Hinnant's algorithm."""
    z = np.arange(_DAY_ZERO, _DAY_ZERO + _DAYS, dtype=np.int64) + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    out = np.full((_DAYS, 10), ord("-"), dtype=np.uint8)
    out[:, 0:4] = _digits(year, 4)
    out[:, 5:7] = _digits(month, 2)
    out[:, 8:10] = _digits(doy - (153 * mp + 2) // 5 + 1, 2)
    return out


def _clock_table() -> np.ndarray:
    """ "HH:MM:SS" (ASCII codes) of each second of a day."""
    second = np.arange(86_400)
    out = np.full((86_400, 8), ord(":"), dtype=np.uint8)
    out[:, 0:2] = _digits(second // 3600, 2)
    out[:, 3:5] = _digits(second // 60 % 60, 2)
    out[:, 6:8] = _digits(second % 60, 2)
    return out


_DATE, _CLOCK, _MILLIS = _date_table(), _clock_table(), _digits(np.arange(1000), 3)


def _iso_texts(us: np.ndarray) -> list[bytes]:
    """RFC 3339 UTC timestamps (milliseconds, "Z") of microsecond epoch times, exactly as `iso`
    writes them, from tables of dates and times of day."""
    days, ms_of_day = np.divmod(us // 1000, 86_400_000)
    days -= _DAY_ZERO
    if len(days) and (days.min() < 0 or days.max() >= _DAYS):
        return [t.encode() for t in iso(us)]
    seconds, millis = np.divmod(ms_of_day, 1000)
    out = np.empty((len(us), 24), dtype=np.uint8)
    out[:, 0:10] = _DATE[days]
    out[:, 10] = ord("T")
    out[:, 11:19] = _CLOCK[seconds]
    out[:, 19] = ord(".")
    out[:, 20:23] = _MILLIS[millis]
    out[:, 23] = ord("Z")
    return out.view("S24").ravel().tolist()


def _stamps(
    wanted: dict[str, tuple[np.ndarray, np.ndarray | None]],
) -> dict[str, list[bytes | None]]:
    """Named lists of the timestamps `us` where `shown` (everywhere when None; None elsewhere),
    formatted at once."""
    picks = {
        name: None if shown is None else np.flatnonzero(shown)
        for name, (_, shown) in wanted.items()
    }
    texts = _iso_texts(
        np.concatenate(
            [us if picks[name] is None else us[picks[name]] for name, (us, _) in wanted.items()]
        )
    )
    out: dict[str, list[bytes | None]] = {}
    first = 0
    for name, (us, _) in wanted.items():
        pick = picks[name]
        if pick is None:
            out[name] = cast("list[bytes | None]", texts[first : first + len(us)])
            first += len(us)
        else:
            column = np.full(len(us), None, dtype=object)
            column[pick] = texts[first : first + len(pick)]
            first += len(pick)
            out[name] = column.tolist()
    return out
