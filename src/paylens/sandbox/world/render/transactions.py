"""`TxViews`: transaction rows and quotes rendered to the interface's JSON text, kept until
they go stale (see the package's docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, cast

import numpy as np
import orjson

from ...currencies import N_RAILS, QUOTE_TTL_S
from ...generate.entities import NO_ROW, Entities
from ...generate.schema import (
    CARD,
    CARD_EXCEPTION,
    CARD_TIP,
    COLUMNS,
    COUNTERPARTY_INFO,
    DEST_UMA,
    INCOMING,
    NEVER,
    NO_CODE,
    OUTGOING,
    SRC_FUNDING,
    US_PER_SECOND,
    status_at,
)
from ..entities import EntityViews, iso
from ..store import TransactionStore
from .batch import Batch, SharedTexts, add_on_chain, optional_members, refund_texts
from .rows import ON_CHAIN_TABLE, WireRows, decode, quote_uuid
from .tables import (
    CARD_TEMPLATE,
    CODE_TEXTS,
    COMPLETED_CODE,
    COUNTERPARTY_IN,
    COUNTERPARTY_OUT,
    CREATED_CODE,
    CURRENCY_TEXT,
    FAILED_CODE,
    FAMILY_SUPPORT_TEXT,
    GOODS_TEXT,
    IN_FAILURE_TEXT,
    INCOMING_TEMPLATE,
    MEMO_NUMBERED,
    MEMO_TEXT,
    MERCHANT_TEXT,
    OUT_FAILURE_TEXT,
    OUTGOING_TEMPLATE,
    PENDING_REASON_TEXT,
    RAIL_MODE_TEXT,
    RAIL_TEXT,
    REGION_TEXT,
    STATUS_TEXT,
    UMA_SOURCE,
    WAITING_STATUS,
)
from .text import (
    DIGIT_TEXT,
    format_rows,
    json_bytes,
    number_texts,
    reference_hex,
    token_hex,
    uuid_bytes,
)


class TransactionViews:
    """Renders transaction rows and quotes of a store."""

    def __init__(self, store: TransactionStore, ents: Entities, views: EntityViews) -> None:
        self.store = store
        self.e = ents
        self.views = views
        self.descriptions: dict[int, str | None] = {}  # descriptions of quote requests (None: none)
        self.uma_senders: dict[int, str] = {}  # sender UMA addresses named on a simulated receive
        self._shared = SharedTexts(ents, views)
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

    def snapshot(self, rows: np.ndarray, at: int) -> list[dict[str, Any]]:
        """The rows as they were (or will be) at clock time `at`, as planned: rendered with
        their status at `at` and not kept (the webhooks of past steps carry these)."""
        return decode(self._render(np.asarray(rows, dtype=np.int64), at, as_planned=True))

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

    def name_uma_sender(self, row: int, address: str) -> None:
        """Set the UMA address an incoming payment's `source` shows (the one a receive named)."""
        self.uma_senders[row] = address
        self.forget(row)

    def describe(self, row: int, description: str | None) -> None:
        """Set the description of a quote's row (None: it has none)."""
        self.descriptions[row] = description
        self.forget(row)

    def _render(self, rows: np.ndarray, now: int, *, as_planned: bool = False) -> list[bytes]:
        """The JSON text of each row, in the order of `rows` (`as_planned`: with the status
        the row's plan gives at `now`, not the one stored)."""
        if not len(rows):
            return []
        kind = self.store.col("kind")[rows]
        order = np.argsort(kind, kind="stable")  # each type's rows become one slice
        first_out, first_card = np.searchsorted(kind[order], [OUTGOING, CARD]).tolist()
        cols = self.store.gather(rows[order], _GATHERED)
        if as_planned:  # and without the changes made after `now` (a receipt confirmed later)
            cols["status"] = status_at(self.store.gather(rows[order]), now)
            for name in ("receipt", "touched"):
                cols[name] = np.where(cols[name] <= now, cols[name], 0)
        batch = Batch(rows[order], cols, now)
        texts = self._payments(batch.part(0, first_out), INCOMING)
        texts += self._payments(batch.part(first_out, first_card), OUTGOING)
        texts += self._cards(batch.part(first_card, len(rows)))
        if len(rows) == 1:
            return texts
        return list(itemgetter(*np.argsort(order).tolist())(texts))

    # --- payments ---------------------------------------------------------------------------

    def _payments(self, p: Batch, kind: int) -> list[bytes]:
        """The texts of INCOMING or OUTGOING rows (all of one type)."""
        n, c, at, sh = len(p.rows), p.c, p.at, self._shared
        if not n:
            return []
        incoming = kind == INCOMING
        status, channel, hi, lo = c["status"], c["channel"], c["hi"], c["lo"]
        completed, failed = status == COMPLETED_CODE, status == FAILED_CODE
        on_chain = ON_CHAIN_TABLE[channel]
        funding = c["source_kind"] == SRC_FUNDING
        refs = reference_hex(hi)

        sources = sh.sources(c, funding, incoming)
        if incoming and self.uma_senders:
            for i, row in enumerate(p.rows.tolist()):
                if row in self.uma_senders:
                    sources[i] = UMA_SOURCE % (
                        json_bytes(self.uma_senders[row]),
                        CODE_TEXTS[c["send_cur"][i]],
                    )
        dest_uma = c["dest_kind"] == DEST_UMA
        destinations = sh.destinations(c, dest_uma)
        if incoming:
            chained = funding & completed & on_chain & (channel >= N_RAILS)
            add_on_chain(sources, chained, hi, lo, channel)
        else:
            add_on_chain(destinations, ~dest_uma & completed & on_chain, hi, lo, channel)

        if incoming:
            sent, received, fees, fx = number_texts(c["sent"], c["received"], c["fees"], c["fx"])
        else:
            sent, received, fees, fx, *rates = number_texts(
                c["sent"], c["received"], c["fees"], c["fx"], c["platform_fee"], c["cpty_mult"],
                c["cpty_fee"], c["mult"], c["fixed_fee"], c["var_rate"], c["var_fee"],
                np.where(c["timeline"] < 0, cast(Any, None), c["timeline"]),
            )  # fmt: skip
        slots: list[Sequence[bytes | None]] = [
            uuid_bytes(hi, lo),
            STATUS_TEXT[status].tolist(),
            sources,
            destinations,
            sh.customers[c["customer"]].tolist(),
            sent,
            CURRENCY_TEXT[c["send_cur"]].tolist(),
            received,
            CURRENCY_TEXT[c["recv_cur"]].tolist(),
            fx,
            fees,
        ]
        if not incoming:
            slots += rates[:7]
            slots += [
                uuid_bytes(*quote_uuid(hi, lo)),
                RAIL_TEXT[channel].tolist(),
                RAIL_MODE_TEXT[c["rail_mode"]].tolist(),
                [b"null" if t is None else b'"%s"' % t for t in at["expected"]],
                rates[7],
            ]
        slots += [
            at["created"],
            at["updated"],
            optional_members(completed, b',"settledAt":"%s"', at["t2"]),
            self._descriptions(p, lo),
            optional_members(
                (status != CREATED_CODE) if incoming else ~on_chain,
                b',"reconciliationInstructions":{"reference":"SBX-%s"}',
                refs,
            ),
        ]
        if not incoming:
            slots.append(self._payment_instructions(p, funding, refs))
        reasons = IN_FAILURE_TEXT if incoming else OUT_FAILURE_TEXT
        slots += [
            reasons[np.where(failed, c["failure"], NO_CODE)].tolist(),
            refund_texts(p, failed & (c["refund_final"] != NO_CODE), refs),
            PENDING_REASON_TEXT[
                np.where(WAITING_STATUS[status], c["pending_reason"], NO_CODE)
            ].tolist(),
            sh.agents[c["agent"]].tolist(),
            optional_members(
                c["receipt"] != 0, b',"receiptDeliveryConfirmedAt":"%s"', at["receipt"]
            ),
            self._counterparties(p, kind),
        ]
        return (INCOMING_TEMPLATE if incoming else OUTGOING_TEMPLATE).fill(slots)

    def _descriptions(self, p: Batch, lo: np.ndarray) -> list[bytes]:
        memo = p.c["memo"]
        out: list[bytes] = MEMO_TEXT[memo].tolist()
        numbers = (1000 + lo % np.uint64(9000)).tolist()
        for i in np.flatnonzero(MEMO_NUMBERED[memo]).tolist():
            out[i] %= numbers[i]
        if self.descriptions:
            for i, row in enumerate(p.rows.tolist()):
                if row in self.descriptions:
                    text = self.descriptions[row]
                    out[i] = b"" if text is None else b',"description":' + orjson.dumps(text)
        return out

    def _payment_instructions(
        self, p: Batch, funding: np.ndarray, refs: list[bytes]
    ) -> list[bytes]:
        """`,"paymentInstructions":[...]` of the outgoing rows funded in real time."""
        out = [b""] * len(p.rows)
        for i in np.flatnonzero(funding).tolist():
            info = self.views.deposit_instructions(
                int(p.c["send_cur"][i]), "SBX-" + refs[i].decode(), int(p.c["hi"][i]), platform=True
            )
            out[i] = b',"paymentInstructions":[%s]' % orjson.dumps(info)
        return out

    def _counterparties(self, p: Batch, kind: int) -> list[bytes]:
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
            REGION_TEXT[e.people.country[person]],
            REGION_TEXT[e.customers.region[p.c["customer"][picks]]],
        ).tolist()
        names = names.tolist()
        if kind == INCOMING:
            texts = format_rows(COUNTERPARTY_IN, names, countries, countries)
        else:
            uma = p.c["dest_kind"][picks].tolist()
            purposes = [FAMILY_SUPPORT_TEXT if k == DEST_UMA else GOODS_TEXT for k in uma]
            texts = format_rows(COUNTERPARTY_OUT, names, countries, purposes)
        for i, text in zip(picks.tolist(), texts, strict=True):
            out[i] = text
        return out

    # --- cards ------------------------------------------------------------------------------

    def _cards(self, p: Batch) -> list[bytes]:
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
        currency = CURRENCY_TEXT[c["send_cur"]].tolist()
        authorized, settled_amount, refunded_amount, pulled_amount = number_texts(
            auth, settled, refund, pulled
        )
        slots: list[Sequence[bytes | None]] = [
            uuid_bytes(c["hi"], c["lo"]),
            sh.cards[c["card"]].tolist(),
            sh.customers[c["customer"]].tolist(),
            token_hex(c["lo"]),
            STATUS_TEXT[c["status"]].tolist(),
            MERCHANT_TEXT[c["merchant"]].tolist(),
            authorized,
            currency,
            optional_members(
                cleared1,
                b',"settledAmount":{"amount":%s,"currency":%s}',
                list(zip(settled_amount, currency, strict=True)),
            ),
            optional_members(
                refunded,
                b',"refundedAmount":{"amount":%s,"currency":%s}',
                list(zip(refunded_amount, currency, strict=True)),
            ),
            sh.accounts[c["sender"]].tolist(),
            DIGIT_TEXT[np.where(tip_pull, 2, 1)].tolist(),
            pulled_amount,
            DIGIT_TEXT[pending.astype(np.int64)].tolist(),
            DIGIT_TEXT[refunded.astype(np.int64)].tolist(),
            refunded_amount,
            DIGIT_TEXT[cleared1.astype(np.int64) + cleared2].tolist(),
            settled_amount,
            at["created"],
            optional_members(cleared1, b',"lastEventAt":"%s"', at["last_event"]),
            at["created"],
            at["updated"],
        ]
        return CARD_TEMPLATE.fill(slots)

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
        expires = int(c["created"][0]) + int(QUOTE_TTL_S[channel]) * US_PER_SECOND
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


_GATHERED = tuple(name for name in COLUMNS if name not in ("final", "cancel_by"))
_BATCH = 4096  # rows rendered per call: numpy's per-call costs vanish, the slots stay in cache
_UNRENDERED = np.iinfo(np.int64).min  # `_until` of a row without a valid text
_PULL_PENDING_US = (
    30 * US_PER_SECOND
)  # a card authorization's pull is pending for its first 30 seconds
