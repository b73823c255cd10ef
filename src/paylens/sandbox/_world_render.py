"""Wire shapes of transactions and quotes, rendered from store rows (a page at a time).

A page's columns are gathered with one numpy fancy-index each and its timestamps formatted in one
vectorised call, then each row becomes a dict of the interface's variant for its `type`.
References (`reconciliationInstructions.reference`) and quote ids are derived from the
transaction's UUID and map back to it, so both can be looked up without an index of their own.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ._currencies import CHANNELS, CODES, N_RAILS, QUOTE_TTL_S, REGIONS, currency_wire
from ._gen_entities import NO_ROW, Entities, uuid_texts
from ._generate import (
    CARD,
    CARD_EXCEPTION,
    CARD_TIP,
    COUNTERPARTY_INFO,
    DEST_ACCOUNT,
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
    SRC_ACCOUNT,
    SRC_FUNDING,
    SRC_UMA,
    ST,
    STATUSES,
    multipliers,
)
from ._world_entities import SANDBOX_DOMAIN, EntityViews, handle, iso
from ._world_store import TxStore

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
_US = 1_000_000


def hi_of_reference(reference: str) -> int | None:
    """The UUID high half of the transaction whose reference this is: a reference is "SBX-" and
    16 hex digits of that half masked (see `_Page`)."""
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


def _hash(hi: int, lo: int) -> str:
    return hashlib.sha256(hi.to_bytes(8, "big") + lo.to_bytes(8, "big")).hexdigest()


class TxViews:
    """Renders transaction rows and quotes of a store."""

    def __init__(self, store: TxStore, ents: Entities, views: EntityViews) -> None:
        self.store = store
        self.e = ents
        self.views = views
        self.descriptions: dict[int, str | None] = {}  # descriptions of quote requests (None: none)

    def transactions(self, rows: np.ndarray, now: int) -> list[dict[str, Any]]:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return []
        page = _Page(self, rows, now)
        out: list[dict[str, Any]] = [{} for _ in page.rows]
        kinds = page.c.kind
        self._payments(page, [i for i, k in enumerate(kinds) if k != CARD], out)
        for i, kind in enumerate(kinds):
            if kind == CARD:
                out[i] = self._card(page, i)
        return out

    # --- payments ---------------------------------------------------------------------------

    def _payments(self, p: _Page, indices: list[int], out: list[dict[str, Any]]) -> None:
        """Render the INCOMING and OUTGOING rows `indices` of a page into `out` (the hot loop of
        every list answer)."""
        c, at, currency, views = p.c, p.at, p.currencies, self.views
        account_ids, descriptions = self.e.accounts.ids, self.descriptions
        for i in indices:
            status, channel = c.status[i], c.channel[i]
            send_cur, recv_cur = c.send_cur[i], c.recv_cur[i]
            incoming = c.kind[i] == INCOMING
            if c.source_kind[i] == SRC_ACCOUNT:
                source = {
                    "sourceType": "ACCOUNT",
                    "accountId": account_ids[c.sender[i]],
                    "currency": CODES[send_cur],
                }
            else:
                source = self._source(p, i, status, channel)
            if c.dest_kind[i] == DEST_ACCOUNT and (incoming or channel not in ON_CHAIN):
                destination = {
                    "destinationType": "ACCOUNT",
                    "accountId": account_ids[c.receiver[i]],
                    "currency": CODES[recv_cur],
                }
            else:
                destination = self._destination(p, i, status, channel)
            row: dict[str, Any] = {
                "id": p.ids[i],
                "status": STATUSES[status],
                "type": "INCOMING" if incoming else "OUTGOING",
                "direction": "CREDIT" if incoming else "DEBIT",
                "source": source,
                "destination": destination,
                "customerId": p.customer_ids[i],
                "platformCustomerId": p.platform_ids[i],
                "sentAmount": {"amount": c.sent[i], "currency": currency[send_cur]},
                "receivedAmount": {"amount": c.received[i], "currency": currency[recv_cur]},
                "exchangeRate": c.fx[i],
                "fees": c.fees[i],
            }
            if not incoming:
                timeline = c.timeline[i]
                row |= {
                    "platformFees": c.platform_fee[i],
                    "rateDetails": {
                        "counterpartyMultiplier": p.cpty_mult[i],
                        "counterpartyFixedFee": c.cpty_fee[i],
                        "gridApiMultiplier": p.mult[i],
                        "gridApiFixedFee": c.fixed_fee[i],
                        "gridApiVariableFeeRate": c.var_rate[i],
                        "gridApiVariableFeeAmount": c.var_fee[i],
                    },
                    "quoteId": p.quote_ids[i],
                    "paymentRail": CHANNELS[channel] if channel < N_RAILS else None,
                    "railSelectionMode": RAIL_MODES[c.rail_mode[i]],
                    "expectedSettlementAt": at["expected"][i],
                    "settlementTimelineSeconds": None if timeline < 0 else timeline,
                }
            row["createdAt"] = at["created"][i]
            row["updatedAt"] = at["updated"][i]
            if status == _COMPLETED:
                row["settledAt"] = at["t2"][i]
            if not descriptions or p.rows[i] not in descriptions:
                row["description"] = _MEMO_TEMPLATES[c.memo[i]] % (1000 + c.lo[i] % 9000)
            elif descriptions[p.rows[i]] is not None:
                row["description"] = descriptions[p.rows[i]]
            reference = p.references[i]
            if (incoming and status != _CREATED) or (not incoming and channel not in ON_CHAIN):
                row["reconciliationInstructions"] = {"reference": reference}
            if not incoming and c.source_kind[i] == SRC_FUNDING:
                row["paymentInstructions"] = [
                    views.deposit_instructions(send_cur, reference, c.hi[i], platform=True)
                ]
            if status == _FAILED:
                if c.failure[i] != NONE8:
                    row["failureReason"] = (IN_FAILURES if incoming else OUT_FAILURES)[c.failure[i]]
                if c.refund_final[i] != NONE8:
                    row["refund"] = self._refund(p, i, reference)
            if c.pending_reason[i] != NONE8 and status in _WAITING:
                row["pendingReason"] = PENDING_REASONS[c.pending_reason[i]]
            if c.agent[i] != NO_ROW:
                row["agentId"] = self.e.agent_ids[c.agent[i]]
            if c.receipt[i]:
                row["receiptDeliveryConfirmedAt"] = at["receipt"][i]
            if c.flags[i] & COUNTERPARTY_INFO:
                row["counterpartyInformation"] = self._counterparty(c, i)
            out[i] = row

    @staticmethod
    def _refund(p: _Page, i: int, reference: str) -> dict[str, Any]:
        c, at = p.c, p.at
        refund: dict[str, Any] = {"reference": reference + "-RF", "initiatedAt": at["t2"][i]}
        if c.t3[i] <= p.now:
            refund["settledAt"] = at["t3"][i]
            refund["status"] = REFUND_STATUSES[c.refund_final[i]]
        else:
            refund["status"] = "PENDING"
        refund["reason"] = REFUND_REASONS[c.refund_reason[i]]
        return refund

    def _person_uma(self, person: int) -> str:
        p = self.e.people
        return f"${handle(int(p.first[person]), int(p.last[person]), person)}@uma.{SANDBOX_DOMAIN}"

    def _source(self, p: _Page, i: int, status: int, channel: int) -> dict[str, Any]:
        e, c = self.e, p.c
        currency = CODES[c.send_cur[i]]
        kind = c.source_kind[i]
        if kind == SRC_UMA:
            return {
                "sourceType": "UMA_ADDRESS",
                "umaAddress": self._person_uma(c.person[i]),
                "currency": currency,
            }
        if kind == SRC_FUNDING:
            out: dict[str, Any] = {
                "sourceType": "REALTIME_FUNDING",
                "currency": currency,
                "customerId": e.customers.ids[c.customer[i]],
            }
            if c.kind[i] == INCOMING:
                out["accountHolderName"] = self.views.customer_name(c.customer[i])
                if channel < N_RAILS:
                    out |= {
                        "bankName": "Paylens Sandbox Partner Bank",
                        "paymentRail": CHANNELS[channel],
                    }
                elif status == ST["COMPLETED"] and channel in ON_CHAIN:
                    out["onChainTransaction"] = {
                        "transactionHash": _hash(c.hi[i], c.lo[i]),
                        "network": ON_CHAIN[channel],
                    }
            return out
        return {
            "sourceType": "ACCOUNT",
            "accountId": e.accounts.ids[c.sender[i]],
            "currency": currency,
        }

    def _destination(self, p: _Page, i: int, status: int, channel: int) -> dict[str, Any]:
        c = p.c
        currency = CODES[c.recv_cur[i]]
        if c.dest_kind[i] == DEST_UMA:
            return {
                "destinationType": "UMA_ADDRESS",
                "umaAddress": self._person_uma(c.person[i]),
                "currency": currency,
            }
        out: dict[str, Any] = {
            "destinationType": "ACCOUNT",
            "accountId": self.e.accounts.ids[c.receiver[i]],
            "currency": currency,
        }
        if c.kind[i] == OUTGOING and status == ST["COMPLETED"] and channel in ON_CHAIN:
            out["onChainTransaction"] = {
                "transactionHash": _hash(c.hi[i], c.lo[i]),
                "network": ON_CHAIN[channel],
            }
        return out

    def _counterparty(self, c: _Columns, i: int) -> dict[str, Any]:
        e = self.e
        person = c.person[i]
        if person != NO_ROW:
            name = e.people.name(person)
            country = REGIONS[e.people.country[person]][0]
        else:
            name = self.views.holder_name(c.receiver[i])
            country = REGIONS[e.customers.region[c.customer[i]]][0]
        info = {"FULL_NAME": name, "COUNTRY_OF_RESIDENCE": country}
        if c.kind[i] == INCOMING:
            info["NATIONALITY"] = country
        else:
            info["PURPOSE_OF_PAYMENT"] = (
                "FAMILY_SUPPORT" if c.dest_kind[i] == DEST_UMA else "GOODS_OR_SERVICES"
            )
        return info

    # --- cards ------------------------------------------------------------------------------

    def _card(self, p: _Page, i: int) -> dict[str, Any]:
        e, c, at, now = self.e, p.c, p.at, p.now
        cur, flags = c.send_cur[i], c.flags[i]
        auth, clear1, clear2 = c.sent[i], c.clear1[i], c.clear2[i]
        merchant = MERCHANTS[c.merchant[i]]
        cleared1, cleared2, refunded = c.t1[i] <= now, c.t2[i] <= now, c.t3[i] <= now
        settled = (clear1 if cleared1 else 0) + (clear2 if cleared2 else 0)
        tip_pull = bool(flags & CARD_TIP) and cleared1
        failed_pull = bool(flags & CARD_EXCEPTION) and cleared1
        pulled = 0 if failed_pull else auth + (clear1 - auth if tip_pull else 0)
        pending = 1 if now < c.created[i] + 30 * _US and not flags & CARD_EXCEPTION else 0
        currency = p.currencies[cur]
        out: dict[str, Any] = {
            "type": "CARD",
            "id": p.ids[i],
            "cardId": e.cards.ids[c.card[i]],
            "customerId": p.customer_ids[i],
            "platformCustomerId": p.platform_ids[i],
            "issuerTransactionToken": f"sbx_txn_{c.lo[i] & 0xFFFFFFFFFF:010x}",
            "status": STATUSES[c.status[i]],
            "direction": "DEBIT",
            "merchant": {
                "descriptor": merchant.descriptor,
                "mcc": merchant.mcc,
                "country": merchant.country,
            },
            "authorizedAmount": {"amount": auth, "currency": currency},
        }
        if cleared1:
            out["settledAmount"] = {"amount": settled, "currency": currency}
        if refunded:
            out["refundedAmount"] = {"amount": c.refund_amount[i], "currency": currency}
        out["accountId"] = e.accounts.ids[c.sender[i]]
        out["pullSummary"] = {
            "count": 2 if tip_pull else 1,
            "totalAmount": pulled,
            "pendingCount": pending,
        }
        out["refundSummary"] = {
            "count": int(refunded),
            "totalAmount": c.refund_amount[i] if refunded else 0,
        }
        out["settlementSummary"] = {"count": int(cleared1) + int(cleared2), "totalAmount": settled}
        out["authorizedAt"] = at["created"][i]
        if cleared1:
            out["lastEventAt"] = at["last_event"][i]
        out["createdAt"] = at["created"][i]
        out["updatedAt"] = at["updated"][i]
        return out

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


_WAITING = frozenset({ST["CREATED"], ST["PENDING"], ST["PENDING_AUTHORIZATION"], ST["PROCESSING"]})
_COMPLETED, _FAILED, _CREATED = ST["COMPLETED"], ST["FAILED"], ST["CREATED"]
_MEMO_TEMPLATES = tuple(
    "[sandbox] " + memo.replace("{n}", "%d") if "{n}" in memo else "[sandbox] " + memo + "%.0s"
    for memo in MEMOS
)


class _Page:
    """The columns of a page of rows as lists, with what its rows share computed at once."""

    def __init__(self, views: TxViews, rows: np.ndarray, now: int) -> None:
        self.now = now
        self.rows = rows.tolist()
        cols = views.store.gather(rows)
        t1, t2, t3 = cols["t1"], cols["t2"], cols["t3"]
        last_event = np.maximum.reduce([np.where(t <= now, t, 0) for t in (t1, t2, t3)])
        updated = np.maximum.reduce([cols["created"], cols["touched"], last_event])
        card = cols["kind"] == CARD
        failed = cols["status"] == _FAILED
        everywhere = np.ones(len(rows), dtype=bool)
        self.at = _stamps(
            {
                "created": (cols["created"], everywhere),
                "updated": (updated, everywhere),
                "t2": (t2, (cols["status"] == _COMPLETED) | failed),
                "t3": (t3, failed & (t3 <= now)),
                "expected": (cols["expected"], cols["expected"] != NEVER),
                "receipt": (cols["receipt"], cols["receipt"] != 0),
                "last_event": (last_event, card & (t1 <= now)),
            }
        )
        mult, cpty = multipliers(cols["send_cur"], cols["recv_cur"], cols["fx"], cols["var_rate"])
        self.mult, self.cpty_mult = mult.tolist(), cpty.tolist()
        self.c = _Columns({name: arr.tolist() for name, arr in cols.items()})
        self.references = [
            f"SBX-{h}" for h in _hex16(cols["hi"] ^ np.uint64(_REFERENCE_MASK)).upper().split()
        ]
        uuids = uuid_texts(cols["hi"], cols["lo"])
        self.ids = [
            ("CardTransaction:" if k == CARD else "Transaction:") + u
            for k, u in zip(self.c.kind, uuids, strict=True)
        ]
        outgoing = cols["kind"] == OUTGOING
        quote_hi, quote_lo = quote_uuid(cols["hi"][outgoing], cols["lo"][outgoing])
        quotes = iter(uuid_texts(quote_hi, quote_lo))
        self.quote_ids = [("Quote:" + next(quotes)) if o else "" for o in outgoing.tolist()]
        customers = views.e.customers
        self.customer_ids = [customers.ids[k] for k in self.c.customer]
        self.platform_ids = [customers.platform_ids[k] for k in self.c.customer]
        self.currencies = _CurrencyDicts()


class _Columns:
    """A page's columns as lists, by name: `c.sent[i]`."""

    def __init__(self, lists: dict[str, list[Any]]) -> None:
        self.__dict__.update(lists)

    def __getattr__(self, name: str) -> list[Any]:  # for type checkers: every column is a list
        raise AttributeError(name)


class _CurrencyDicts(dict[int, dict[str, Any]]):
    """Currency objects of a page, one dict per currency."""

    def __missing__(self, index: int) -> dict[str, Any]:
        got = self[index] = currency_wire(index)
        return got


def _stamps(wanted: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, list[str | None]]:
    """Named lists of the timestamps `us` where `needed` (None elsewhere), formatted at once."""
    picks = [np.flatnonzero(needed) for _, needed in wanted.values()]
    texts = np.array(
        iso(
            np.concatenate([us[pick] for (us, _), pick in zip(wanted.values(), picks, strict=True)])
        ),
        dtype=object,
    )
    out: dict[str, list[str | None]] = {}
    first = 0
    for (name, (us, _)), pick in zip(wanted.items(), picks, strict=True):
        column = np.full(len(us), None, dtype=object)
        column[pick] = texts[first : first + len(pick)]
        first += len(pick)
        out[name] = column.tolist()
    return out


def _hex16(values: np.ndarray) -> str:
    """Space-separated 16-digit hex of uint64 values."""
    raw = values.astype(">u8").tobytes().hex()
    return " ".join(raw[k : k + 16] for k in range(0, len(raw), 16))
