"""A batch of rows being rendered, and what rows share (accounts, customers, people,
encoded once per world)."""

from __future__ import annotations

import hashlib
from typing import Any, cast

import numpy as np

from ...generate.entities import Entities
from ...generate.money import multipliers
from ...generate.schema import CARD, NEVER, SRC_UMA
from ..entities import SANDBOX_DOMAIN, EntityViews, handle
from .rows import ON_CHAIN
from .tables import (
    ACCOUNT_DESTINATION,
    ACCOUNT_SOURCE,
    CODE_TEXT,
    CODE_TEXTS,
    COMPLETED_CODE,
    FAILED_CODE,
    FUNDING_RAIL_TEXT,
    INCOMING_FUNDING,
    ON_CHAIN_TAIL,
    OUTGOING_FUNDING,
    REFUND_DONE,
    REFUND_PENDING,
    REFUND_REASON_TEXT,
    REFUND_STATUS_TEXT,
    UMA_DESTINATION,
    UMA_SOURCE,
)
from .text import EncodedCache, format_rows, iso_stamps, json_bytes


class Batch:
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
            failed = status == FAILED_CODE
            at = iso_stamps(
                {
                    "created": (c["created"], None),
                    "updated": (updated, None),
                    "t2": (t2, (status == COMPLETED_CODE) | failed),
                    "t3": (t3, failed & (t3 <= now)),
                    "expected": (c["expected"], c["expected"] != NEVER),
                    "receipt": (c["receipt"], c["receipt"] != 0),
                    "last_event": (last_event, (c["kind"] == CARD) & (t1 <= now)),
                }
            )
            mult, cpty = multipliers(c["send_cur"], c["recv_cur"], c["fx"], c["var_rate"])
            c = c | {"mult": mult, "cpty_mult": cpty}
        self.c, self.at = c, at

    def part(self, a: int, b: int) -> Batch:
        """The rows [a, b) of this batch."""
        return Batch(
            self.rows[a:b],
            {name: col[a:b] for name, col in self.c.items()},
            self.now,
            {name: texts[a:b] for name, texts in self.at.items()},
        )


def add_on_chain(
    texts: list[bytes], picked: np.ndarray, hi: np.ndarray, lo: np.ndarray, channel: np.ndarray
) -> None:
    """Close the objects `texts[i]` where `picked` with their `onChainTransaction`."""
    for i in np.flatnonzero(picked).tolist():
        digest = hashlib.sha256(int(hi[i]).to_bytes(8, "big") + int(lo[i]).to_bytes(8, "big"))
        network = ON_CHAIN[int(channel[i])].encode()
        texts[i] = texts[i][:-1] + ON_CHAIN_TAIL % (digest.hexdigest().encode(), network)


def refund_texts(p: Batch, picked: np.ndarray, refs: list[bytes]) -> list[bytes]:
    """`,"refund":{...}` of the rows where `picked`."""
    out = [b""] * len(picked)
    for i in np.flatnonzero(picked).tolist():
        reason = REFUND_REASON_TEXT[p.c["refund_reason"][i]]
        if p.c["t3"][i] <= p.now:
            status = REFUND_STATUS_TEXT[p.c["refund_final"][i]]
            out[i] = REFUND_DONE % (refs[i], p.at["t2"][i], p.at["t3"][i], status, reason)
        else:
            out[i] = REFUND_PENDING % (refs[i], p.at["t2"][i], reason)
    return out


def optional_members(picked: np.ndarray, template: bytes, values: list[Any]) -> list[bytes]:
    """`template % values[i]` where `picked`, b"" elsewhere."""
    out = [b""] * len(picked)
    for i in np.flatnonzero(picked).tolist():
        out[i] = template % values[i]
    return out


class SharedTexts:
    """What many rows show, encoded once: accounts, customers, cards, agents and people by
    entity row (names derived with a seeded generator, when first shown)."""

    def __init__(self, ents: Entities, views: EntityViews) -> None:
        customers, accounts, people = ents.customers, ents.accounts, ents.people
        ids = [json_bytes(i) for i in accounts.ids]
        currencies = accounts.currency.tolist()
        self.accounts = np.array(ids, dtype=object)
        self.account_currency = accounts.currency
        self.account_sources = np.array(
            [ACCOUNT_SOURCE % (i, CODE_TEXT[k]) for i, k in zip(ids, currencies, strict=True)],
            dtype=object,
        )
        self.account_destinations = np.array(
            [ACCOUNT_DESTINATION % (i, CODE_TEXT[k]) for i, k in zip(ids, currencies, strict=True)],
            dtype=object,
        )
        self.cards = np.array([json_bytes(i) for i in ents.cards.ids], dtype=object)
        self.customer_ids = np.array([json_bytes(i) for i in customers.ids], dtype=object)
        self.customers = np.array(
            [
                b'"customerId":%s,"platformCustomerId":%s' % (i, json_bytes(p))
                for i, p in zip(self.customer_ids.tolist(), customers.platform_ids, strict=True)
            ],
            dtype=object,
        )
        self.customer_names = EncodedCache(lambda k: json_bytes(views.customer_name(k)))
        # `,"agentId":...` by agent; the last entry, at index NO_ROW (-1), for rows of none
        self.agents = np.array(
            [b',"agentId":' + json_bytes(a) for a in ents.agent_ids] + [b""], dtype=object
        )
        self.people = np.array(
            [json_bytes(people.name(i)) for i in range(len(people))] + [b""], dtype=object
        )
        self.umas = np.array(
            [
                json_bytes(f"${handle(int(first), int(last), i)}@uma.{SANDBOX_DOMAIN}")
                for i, (first, last) in enumerate(zip(people.first, people.last, strict=True))
            ],
            dtype=object,
        )
        self.holder_names = EncodedCache(lambda account: json_bytes(views.holder_name(account)))

    def sources(self, c: dict[str, np.ndarray], funding: np.ndarray, incoming: bool) -> list[bytes]:
        """The `source` of payment rows, without `onChainTransaction`."""
        uma = c["source_kind"] == SRC_UMA
        code = CODE_TEXTS[c["send_cur"]]
        out = self._accounts(
            self.account_sources, ACCOUNT_SOURCE, ~uma & ~funding, c["sender"], c["send_cur"]
        )
        if uma.any():
            at = np.flatnonzero(uma)
            out[at] = format_rows(UMA_SOURCE, self.umas[c["person"][at]], code[at])
        if funding.any():
            at = np.flatnonzero(funding)
            customer = c["customer"][at]
            if incoming:
                out[at] = format_rows(
                    INCOMING_FUNDING,
                    code[at],
                    self.customer_ids[customer],
                    self.customer_names.texts(customer),
                    FUNDING_RAIL_TEXT[c["channel"][at]],
                )
            else:
                out[at] = format_rows(OUTGOING_FUNDING, code[at], self.customer_ids[customer])
        rendered: list[bytes] = out.tolist()
        return rendered

    def destinations(self, c: dict[str, np.ndarray], uma: np.ndarray) -> list[bytes]:
        """The `destination` of payment rows, without `onChainTransaction`."""
        out = self._accounts(
            self.account_destinations, ACCOUNT_DESTINATION, ~uma, c["receiver"], c["recv_cur"]
        )
        if uma.any():
            at = np.flatnonzero(uma)
            out[at] = format_rows(
                UMA_DESTINATION, self.umas[c["person"][at]], CODE_TEXTS[c["recv_cur"][at]]
            )
        rendered: list[bytes] = out.tolist()
        return rendered

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
            out[other] = format_rows(
                template, self.accounts[account[other]], CODE_TEXTS[currency[other]]
            )
        return out
