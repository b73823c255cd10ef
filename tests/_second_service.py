"""A second, independent implementation of the parts of the service a sync reads.

It imports nothing from `paylens.sandbox` and follows its own habits, all within the
specification (`../shared/reference/service-spec.md`) and the interface
(`../shared/reference/openapi.yaml`, read at test time for its enums):

- instants are kept in integer nanoseconds; `createdAt` is written with a configurable
  precision (`Habits.precision`: "us" six digits, "ns" nine digits as RFC 3339 allows, "s" whole
  seconds, which makes many ties), with `Z` or `+00:00`;
- list order is by `createdAt` (`sortOrder`, default `desc`); records created in the same
  instant are ordered by a hash of their id (not by id, not by insertion);
- the cursor is a keyset cursor (base32 of the last key and a filter digest), not an offset;
- pages are often shorter than `limit` while `hasMore` is true (the interface only says
  "maximum"); the default limit is 20;
- `totalCount` is exact for the filter; `status=REFUNDED` selects transfers only (card statuses
  are not TransactionStatus values) unless `Habits.refunded_selects_cards`;
- records arrive late (listed from their arrival on, with their original `createdAt`), many
  records are created in one instant, transfers go through every lifecycle (open statuses,
  completion, failure with a refund that progresses later, expiry), receipts are confirmed on
  terminal transfers of any age, memos are edited, card holds settle (in parts, late), are
  refunded or end in EXCEPTION;
- customers are updated and deleted (each change stamped in `updatedAt`), accounts are added
  and removed and balances move, cards are closed and frozen.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from ._helpers import interface

BASE_URL = "https://second.service.invalid/2025-10-13"
NS = 1_000_000_000


@cache
def enum(name: str) -> list[str]:
    return list(interface()["components"]["schemas"][name]["enum"])


def to_ns(t: datetime) -> int:
    return int(t.timestamp()) * NS + t.microsecond * 1000


def parse_ns(text: str) -> int:
    """An RFC 3339 date-time to integer nanoseconds (any number of fraction digits)."""
    text = text.strip()
    if text[-1] in "Zz":
        text, offset = text[:-1], timedelta(0)
    else:
        sign = 1 if text[-6] == "+" else -1
        hours, minutes = int(text[-5:-3]), int(text[-2:])
        text, offset = text[:-6], sign * timedelta(hours=hours, minutes=minutes)
    frac = 0
    if "." in text:
        text, digits = text.split(".")
        frac = int((digits + "000000000")[:9])
    base = datetime.fromisoformat(text).replace(tzinfo=UTC) - offset
    return int(base.timestamp()) * NS + frac


@dataclass
class Habits:
    precision: str = "us"  # "us", "ns" or "s"
    zulu: bool = True
    short_pages: bool = True
    refunded_selects_cards: bool = False
    #: terminal transfers move to another terminal status (COMPLETED -> FAILED with
    #: PAYOUT_RETURNED, as a payout partner returns a paid-out payment); the spec shows no
    #: transitions, so none is excluded
    returns: bool = False
    late: float = 0.15  # share of new records that arrive late
    bursts: bool = True  # many records created in one instant
    burst: tuple[int, int] = (5, 60)  # how many
    #: balances move with the money the records move (`SecondService.post`), each posted when
    #: it happens, instead of being set at random now and then
    ledger: bool = False


def fmt(ns: int, habits: Habits) -> str:
    seconds, frac = divmod(ns, NS)
    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if habits.precision == "ns":
        base += f".{frac:09d}"
    elif habits.precision == "us":
        base += f".{frac // 1000:06d}"
    return base + ("Z" if habits.zulu else "+00:00")


def _tie(record_id: str) -> str:
    return hashlib.sha1(record_id.encode()).hexdigest()


def _money(amount: int, code: str = "USD") -> dict[str, Any]:
    decimals = {"USD": 2, "EUR": 2, "JPY": 0, "BTC": 8}[code]
    return {"amount": int(amount), "currency": {"code": code, "decimals": decimals}}


@dataclass
class Item:
    """A record and the service's bookkeeping of it."""

    record: dict[str, Any]
    created_ns: int
    visible_from: int  # arrival (ns): listed from then on
    kind: str = ""
    due: int = 0  # when its next lifecycle step happens (ns)


@dataclass
class SecondService:
    seed: int
    habits: Habits = field(default_factory=Habits)
    start: datetime = datetime(2025, 9, 1, tzinfo=UTC)
    days: int = 30
    per_day: int = 12
    client_id: str = "second-client"
    client_secret: str = "second-secret"
    #: nothing happens by itself: a test builds the records and moves them (`put`, `tick`)
    manual: bool = False

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.now = to_ns(self.start)
        self.txs: dict[str, Item] = {}
        self.deleted: set[str] = set()  # ids `delete`d
        self.customers: dict[str, dict[str, Any]] = {}
        self.cards: dict[str, dict[str, Any]] = {}
        self.internal: dict[str, dict[str, Any]] = {}
        self.external: dict[str, dict[str, Any]] = {}
        self.requests: list[httpx.Request] = []
        self.platform_external = _platform_external(self.seed)
        #: (account id, when (ns), amount): what moved each balance, when `habits.ledger`
        self.postings: list[tuple[str, int, int]] = []
        self.opening: dict[str, int] = {}  # each account's balance before any posting
        for _ in range(12):
            self._new_customer()
        if self.manual:
            return
        end = self.now + self.days * 86400 * NS
        # history: the clock runs through it, so everything is in some stage of its life
        while self.now < end:
            self._step(min(end, self.now + 6 * 3600 * NS))

    # -- time and evolution ----------------------------------------------------------------

    @property
    def clock(self) -> datetime:
        return datetime.fromtimestamp(self.now // NS, UTC).replace(
            microsecond=(self.now % NS) // 1000
        )

    def advance(self, delta: timedelta) -> None:
        target = self.now + int(delta.total_seconds() * NS)
        while self.now < target:
            self._step(min(target, self.now + 6 * 3600 * NS))

    def _at(self, lo: int, hi: int) -> int:
        ns = self.rng.randrange(lo, max(lo + 1, hi))
        if self.habits.precision == "s":
            ns -= ns % NS
        elif self.habits.precision == "us":
            ns -= ns % 1000
        return ns

    def _step(self, until: int) -> None:
        lo = self.now
        hours = (until - lo) / (3600 * NS)
        new = max(0, round(self.rng.gauss(self.per_day * hours / 24, 2)))
        for _ in range(new):
            created = self._at(lo, until)
            arrival = created
            if self.rng.random() < self.habits.late:
                created = self._at(lo - 20 * 86400 * NS, lo - 3 * 86400 * NS)
                arrival = self._at(lo, until)
            self._new_record(created, arrival)
        if self.habits.bursts and self.rng.random() < 0.3:  # a bulk payout: one instant
            instant = self._at(lo, until)
            for _ in range(self.rng.randint(*self.habits.burst)):
                self._new_record(instant, instant, kind="OUTGOING")
        self.now = until
        self._lifecycle()
        self._others()

    def _stamp(self, item: Item) -> None:
        item.record["updatedAt"] = fmt(self.now, self.habits)

    def _lifecycle(self) -> None:
        rng = self.rng
        for item in self.txs.values():
            if item.visible_from > self.now or item.due > self.now:
                continue
            r = item.record
            before = json.dumps(r, sort_keys=True)
            if r["type"] == "CARD":
                self._card_step(item)
            else:
                self._transfer_step(item)
            if json.dumps(r, sort_keys=True) != before:
                self._stamp(item)
        # changes on terminal records without a status change, at any age
        done = [i for i in self.txs.values() if i.visible_from <= self.now]
        for item in rng.sample(done, min(len(done), 4)):
            r = item.record
            if r["type"] != "CARD" and r["status"] == "COMPLETED":
                if "receiptDeliveryConfirmedAt" not in r:
                    r["receiptDeliveryConfirmedAt"] = fmt(self.now, self.habits)
                else:
                    r["description"] = f"memo {rng.randrange(10**6)}"
                self._stamp(item)
            elif r["type"] != "CARD" and r["status"] in ("FAILED", "EXPIRED"):
                r["description"] = f"note {rng.randrange(10**6)}"
                self._stamp(item)

    def _later(self, item: Item, lo_h: float, hi_h: float) -> None:
        item.due = self.now + int(self.rng.uniform(lo_h, hi_h) * 3600 * NS)

    def _transfer_step(self, item: Item) -> None:
        r, rng = item.record, self.rng
        status = r["status"]
        if status == "CREATED":
            r["status"] = "PENDING"
            r["reconciliationInstructions"] = {"reference": f"R2-{rng.randrange(16**10):010X}"}
            self._later(item, 1, 30)
        elif status == "PENDING":
            x = rng.random()
            if r["type"] == "OUTGOING" and x < 0.1:
                r["status"] = "EXPIRED"
                r["failureReason"] = "QUOTE_EXPIRED"
            elif r["type"] == "OUTGOING" and x < 0.25:
                r["status"] = "PENDING_AUTHORIZATION"
                self._later(item, 1, 20)
            else:
                r["status"] = "PROCESSING"
                self._later(item, 2, 96)
        elif status == "PENDING_AUTHORIZATION":
            r["status"] = "PROCESSING" if rng.random() < 0.8 else "FAILED"
            if r["status"] == "FAILED":
                r["failureReason"] = "SCA_NOT_COMPLETED"
            self._later(item, 2, 60)
        elif status == "PROCESSING":
            if rng.random() < 0.8:
                r["status"] = "COMPLETED"
                r["settledAt"] = fmt(self.now, self.habits)
                self._post_transfer(r, 1)
                if self.habits.returns and r["type"] == "OUTGOING" and rng.random() < 0.3:
                    self._later(item, 24, 24 * 8)  # may be returned later
                else:
                    item.due = 2**62
            else:
                r["status"] = "FAILED"
                r["failureReason"] = (
                    "QUOTE_EXECUTION_FAILED" if r["type"] == "OUTGOING" else "COLLECTION_FAILED"
                )
                if rng.random() < 0.7:
                    if r["type"] == "OUTGOING":  # debited, to be refunded
                        self._post_transfer(r, 1)
                    r["refund"] = {
                        "reference": f"RF-{rng.randrange(16**8):08X}",
                        "initiatedAt": fmt(self.now, self.habits),
                        "status": "PENDING",
                        "reason": "TRANSACTION_FAILED",
                    }
                    self._later(item, 12, 24 * 6)
                else:
                    item.due = 2**62
        elif status == "FAILED" and (r.get("refund") or {}).get("status") == "PENDING":
            r["refund"]["status"] = "COMPLETED" if rng.random() < 0.85 else "FAILED"
            if r["type"] == "OUTGOING" and r["refund"]["status"] == "COMPLETED":
                self._post_transfer(r, -1)
            r["refund"]["settledAt"] = fmt(self.now, self.habits)
            item.due = 2**62
        elif status == "COMPLETED" and self.habits.returns:
            r["status"] = "FAILED"
            r["failureReason"] = "PAYOUT_RETURNED"
            item.due = 2**62
        else:
            item.due = 2**62

    def _card_step(self, item: Item) -> None:
        r, rng = item.record, self.rng
        auth = r["authorizedAmount"]["amount"]
        status = r["status"]
        event = fmt(self.now, self.habits)
        if status in ("AUTHORIZED", "PARTIALLY_SETTLED"):
            settled = (r.get("settledAmount") or {}).get("amount", 0)
            x = rng.random()
            if status == "AUTHORIZED" and x < 0.3:  # a split shipment: part now
                part = auth // 2
                r["status"] = "PARTIALLY_SETTLED"
                self._settle(r, settled + part, event)
                self._later(item, 24, 24 * 20)  # the rest clears late
            elif x < 0.05:
                r["status"] = "EXCEPTION"
                self._settle(r, auth, event)
                item.due = 2**62
            else:
                tip = rng.choice([0, 0, auth // 10])
                r["status"] = "SETTLED"
                self._settle(r, auth + tip if status == "AUTHORIZED" else auth, event)
                self._later(item, 24, 24 * 15) if rng.random() < 0.25 else None
                if item.due <= self.now:
                    item.due = 2**62
        elif status == "SETTLED":
            settled = r["settledAmount"]["amount"]
            refund = settled if rng.random() < 0.5 else settled // 3
            r["status"] = "REFUNDED"
            r["refundedAmount"] = _money(refund, r["authorizedAmount"]["currency"]["code"])
            self.post(r["accountId"], refund)
            r["refundSummary"] = {"count": 1, "totalAmount": refund}
            r["lastEventAt"] = event
            item.due = 2**62
        else:
            item.due = 2**62

    def _settle(self, r: dict[str, Any], amount: int, event: str) -> None:
        code = r["authorizedAmount"]["currency"]["code"]
        self.post(r["accountId"], -(amount - r["pullSummary"]["totalAmount"]))
        count = r["settlementSummary"]["count"] + 1
        r["settledAmount"] = _money(amount, code)
        r["settlementSummary"] = {"count": count, "totalAmount": amount}
        r["pullSummary"] = {"count": count, "totalAmount": amount, "pendingCount": 0}
        r["lastEventAt"] = event

    def _new_record(self, created: int, arrival: int, kind: str | None = None) -> None:
        rng = self.rng
        kind = kind or rng.choice(["INCOMING", "OUTGOING", "OUTGOING", "CARD"])
        customer = rng.choice(list(self.customers.values()))
        accounts = [a for a in self.internal.values() if a.get("customerId") == customer["id"]]
        account = accounts[0] if accounts else rng.choice(list(self.internal.values()))
        code = account["balance"]["currency"]["code"]
        amount = rng.randrange(100, 500_000)
        base: dict[str, Any] = {
            "customerId": customer["id"],
            "platformCustomerId": customer["platformCustomerId"],
            "createdAt": fmt(created, self.habits),
            "updatedAt": fmt(max(created, arrival), self.habits),
        }
        if kind == "CARD":
            rid = f"CardTransaction:{uuid.UUID(int=rng.getrandbits(128), version=4)}"
            card = rng.choice(list(self.cards.values()))
            record = {
                "type": "CARD",
                "id": rid,
                "cardId": card["id"],
                **base,
                "issuerTransactionToken": f"iss_{rng.randrange(16**12):012x}",
                "status": "AUTHORIZED",
                "direction": "DEBIT",
                "merchant": {
                    "descriptor": rng.choice(["CAFE", "HOTEL 9", "RIDE CO"]),
                    "mcc": "5812",
                },
                "authorizedAmount": _money(amount // 10, code),
                "accountId": account["id"],
                "pullSummary": {"count": 0, "totalAmount": 0, "pendingCount": 1},
                "refundSummary": {"count": 0, "totalAmount": 0},
                "settlementSummary": {"count": 0, "totalAmount": 0},
                "authorizedAt": fmt(created, self.habits),
            }
            item = Item(record, created, arrival, "CARD")
            item.due = arrival + int(rng.uniform(1, 24 * 12) * 3600 * NS)
        else:
            rid = f"Transaction:{uuid.UUID(int=rng.getrandbits(128), version=4)}"
            ext = rng.choice(list(self.external.values()))
            outgoing = kind == "OUTGOING"
            mine = {"accountId": account["id"], "currency": code}
            theirs = {"accountId": ext["id"], "currency": code}
            record = {
                "id": rid,
                "status": "PENDING" if outgoing else rng.choice(["CREATED", "PENDING"]),
                "type": kind,
                "direction": "DEBIT" if outgoing else "CREDIT",
                "source": {"sourceType": "ACCOUNT", **(mine if outgoing else theirs)},
                "destination": {"destinationType": "ACCOUNT", **(theirs if outgoing else mine)},
                **base,
            }
            fees = rng.randrange(0, 2000)
            if outgoing:
                record["sentAmount"] = _money(amount, code)
                if rng.random() < 0.7:
                    record["receivedAmount"] = _money(amount - fees, code)
                    record["fees"] = fees
                    record["platformFees"] = 0
                    record["exchangeRate"] = 1.0
                record["paymentRail"] = rng.choice(["ACH", "WIRE", None])
                record["railSelectionMode"] = None if record["paymentRail"] is None else "AUTO"
            else:
                record["receivedAmount"] = _money(amount, code)
            if rng.random() < 0.5:
                record["description"] = f"order {rng.randrange(10**5)}"
            if record["status"] != "CREATED":
                record["reconciliationInstructions"] = {
                    "reference": f"R2-{rng.randrange(16**10):010X}"
                }
            item = Item(record, created, arrival, kind)
            item.due = arrival + int(rng.uniform(0.5, 30) * 3600 * NS)
        self.txs[rid] = item

    def _new_customer(self) -> dict[str, Any]:
        rng = self.rng
        cid = f"Customer:{uuid.UUID(int=rng.getrandbits(128), version=4)}"
        stamp = fmt(self.now - rng.randrange(0, 400 * 86400) * NS, self.habits)
        n = len(self.customers)
        customer = {
            "id": cid,
            "platformCustomerId": f"c2-{n:04d}",
            "customerType": "INDIVIDUAL",
            "region": "US",
            "currencies": ["USD"],
            "email": f"user{n}@second.invalid",
            "umaAddress": f"$user{n}@second.invalid",
            "fullName": f"User {n}",
            "kycStatus": "APPROVED",
            "createdAt": stamp,
            "updatedAt": stamp,
            "isDeleted": False,
        }
        self.customers[cid] = customer
        self._new_internal(cid)
        self._new_external(cid)
        if rng.random() < 0.7 or not self.cards:
            self._new_card(cid)
        return customer

    def _new_internal(self, cid: str) -> None:
        aid = f"InternalAccount:{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"
        stamp = fmt(self.now, self.habits)
        balance = self.rng.randrange(0, 10**7)
        self.opening[aid] = balance
        self.internal[aid] = {
            "id": aid,
            "customerId": cid,
            "type": "INTERNAL_FIAT",
            "status": "ACTIVE",
            "balance": _money(balance),
            "totalBalance": _money(balance),
            "fundingPaymentInstructions": [],
            "createdAt": stamp,
            "updatedAt": stamp,
        }

    def _new_external(self, cid: str) -> None:
        eid = f"ExternalAccount:{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"
        self.external[eid] = {
            "id": eid,
            "customerId": cid,
            "status": "ACTIVE",
            "currency": "USD",
            "accountInfo": {
                "accountType": "USD_ACCOUNT",
                "accountNumber": f"{self.rng.randrange(10**11, 10**12)}",
                "routingNumber": "021000021",
                "paymentRails": ["ACH"],
            },
        }

    def _new_card(self, cid: str) -> None:
        kid = f"Card:{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"
        stamp = fmt(self.now, self.habits)
        self.cards[kid] = {
            "id": kid,
            "cardholderId": cid,
            "state": "ACTIVE",
            "form": "VIRTUAL",
            "brand": "VISA",
            "last4": f"{self.rng.randrange(10000):04d}",
            "fundingSources": [],
            "maxSpendPerTransaction": None,
            "currency": "USD",
            "createdAt": stamp,
            "updatedAt": stamp,
        }

    def _others(self) -> None:
        rng = self.rng
        stamp = fmt(self.now, self.habits)
        live = [c for c in self.customers.values() if not c["isDeleted"]]
        if rng.random() < 0.5:
            self._new_customer()
        if live and rng.random() < 0.6:
            c = rng.choice(live)
            c["fullName"] = f"{c['fullName'].split(' #')[0]} #{rng.randrange(1000)}"
            c["updatedAt"] = stamp
        if len(live) > 8 and rng.random() < 0.2:
            c = rng.choice(live)
            c["isDeleted"] = True
            c["updatedAt"] = stamp
        for a in rng.sample(list(self.internal.values()), min(3, len(self.internal))):
            if self.habits.ledger:
                continue
            a["balance"] = _money(rng.randrange(0, 10**7))
            a["totalBalance"] = a["balance"]
            a["updatedAt"] = stamp
        if len(self.internal) > 6 and rng.random() < 0.15:
            self.internal.pop(rng.choice(sorted(self.internal)))
        if len(self.external) > 6 and rng.random() < 0.15:
            self.external.pop(rng.choice(sorted(self.external)))
        open_cards = [k for k in self.cards.values() if k["state"] != "CLOSED"]
        if open_cards and rng.random() < 0.3:
            k = rng.choice(open_cards)
            k["state"] = rng.choice(
                ["CLOSED", "FROZEN"] if k["state"] == "ACTIVE" else ["ACTIVE", "CLOSED"]
            )
            k["updatedAt"] = stamp

    # -- hand-built scenarios ---------------------------------------------------------------

    def put(
        self,
        kind: str,
        created: datetime,
        status: str,
        *,
        frac_ns: int = 0,
        arrives: datetime | None = None,
        **fields: Any,
    ) -> str:
        """A record of `kind` created at `created` (+ `frac_ns` nanoseconds), listed from
        `arrives` (default: its creation), in `status`; nothing moves it but the test."""
        created_ns = to_ns(created) + frac_ns
        arrival = to_ns(arrives) if arrives is not None else created_ns
        before = set(self.txs)
        self._new_record(created_ns, arrival, kind)
        (rid,) = set(self.txs) - before
        item = self.txs[rid]
        item.due = 2**62
        item.record["status"] = status
        item.record["updatedAt"] = fmt(max(created_ns, arrival), self.habits)
        item.record.update(fields)
        return rid

    def change(self, rid: str, **fields: Any) -> None:
        self.txs[rid].record.update(fields)
        self._stamp(self.txs[rid])

    def delete(self, rid: str) -> None:
        """The record is gone (deleted, or merged away): no listing or count shows it, and
        reading it by id answers 404."""
        del self.txs[rid]
        self.deleted.add(rid)

    def post(self, account_id: str, amount: int) -> None:
        """Move an account's balance by `amount` now (a posting no listed record need show)."""
        if amount:
            self.postings.append((account_id, self.now, amount))

    def _post_transfer(self, r: dict[str, Any], sign: int) -> None:
        """A transfer's money moves now: an outgoing one debits its source account by what
        was sent (`sign` -1: a refund credits it back), an incoming one credits its
        destination with what was received."""
        if r["type"] == "OUTGOING":
            self.post(r["source"]["accountId"], -sign * r["sentAmount"]["amount"])
        else:
            self.post(r["destination"]["accountId"], sign * r["receivedAmount"]["amount"])

    def balance(self, account_id: str) -> int:
        """An account's balance now, when `habits.ledger`: its opening plus every posting."""
        moved = sum(a for i, at, a in self.postings if i == account_id and at <= self.now)
        return self.opening[account_id] + moved

    def tick(self, delta: timedelta) -> None:
        """The clock moves on; nothing else happens."""
        self.now += int(delta.total_seconds() * NS)

    # -- truth -------------------------------------------------------------------------------

    def listed(self) -> dict[str, dict[str, Any]]:
        return {i: t.record for i, t in self.txs.items() if t.visible_from <= self.now}

    # -- HTTP -------------------------------------------------------------------------------

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def client(self, **kw: Any) -> Any:
        from paylens import Client

        return Client(
            BASE_URL, self.client_id, self.client_secret, transport=self.transport(), **kw
        )

    def _reply(self, status: int, body: Any) -> httpx.Response:
        headers = {"Date": format_datetime(self.clock.replace(microsecond=0), usegmt=True)}
        return httpx.Response(status, json=body, headers=headers)

    def _error(self, status: int, code: str, message: str) -> httpx.Response:
        return self._reply(status, {"status": status, "code": code, "message": message})

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path.removeprefix("/2025-10-13")
        q = dict(request.url.params)
        try:
            if request.method != "GET":
                return self._error(405, "INVALID_INPUT", "read-only service")
            if path == "/transactions":
                return self._list_transactions(q)
            if path.startswith("/transactions/"):
                tid = path.split("/")[2]
                item = self.txs.get(tid)
                if item is None or item.visible_from > self.now:
                    return self._error(404, "TRANSACTION_NOT_FOUND", tid)
                return self._reply(200, item.record)
            if path == "/customers":
                return self._list_customers(q)
            if path == "/cards":
                return self._list_plain(q, list(self.cards.values()), desc_default=True)
            if path == "/customers/internal-accounts":
                if self.habits.ledger:
                    for a in self.internal.values():
                        a["balance"] = _money(self.balance(a["id"]))
                        a["totalBalance"] = _money(self.balance(a["id"]))
                rows = [a for a in self.internal.values() if _match(a, q, "balance")]
                return self._list_plain(q, rows)
            if path == "/customers/external-accounts":
                rows = [a for a in self.external.values() if _match(a, q, "currency")]
                return self._list_plain(q, rows)
            if path == "/platform/external-accounts":
                rows = [a for a in self.platform_external.values() if _match(a, q, "currency")]
                return self._list_plain(q, rows)
            return self._error(404, "REFERENCE_NOT_FOUND", path)
        except ValueError as exc:
            return self._error(400, "INVALID_INPUT", str(exc))

    def _limit(self, q: dict[str, str]) -> int:
        limit = int(q.get("limit", "20"))
        if not 1 <= limit <= 100:
            raise ValueError("limit must be 1..100")
        return limit

    def _page(
        self, q: dict[str, str], rows: list[tuple[tuple[Any, ...], dict[str, Any]]]
    ) -> httpx.Response:
        """Rows sorted by key already; a keyset cursor over them."""
        limit = self._limit(q)
        digest = hashlib.sha1(
            json.dumps(
                sorted((k, v) for k, v in q.items() if k not in ("cursor", "limit"))
            ).encode()
        ).hexdigest()[:8]
        if "cursor" in q:
            raw = json.loads(base64.b32decode(q["cursor"].encode()).decode())
            if raw["f"] != digest:
                raise ValueError("cursor of another listing")
            after = tuple(raw["k"])
            rows = [r for r in rows if tuple(r[0]) > after]
        size = limit
        if self.habits.short_pages and len(rows) > 1:
            # a page shorter than asked for, decided by where it starts
            h = int(hashlib.sha1(f"{self.seed}{q.get('cursor')}{limit}".encode()).hexdigest(), 16)
            if h % 3 == 0:
                size = max(1, limit - h % limit)
        page = rows[:size]
        more = len(rows) > size
        body: dict[str, Any] = {"data": [r[1] for r in page], "hasMore": more}
        if more:
            key = list(page[-1][0])
            body["nextCursor"] = base64.b32encode(
                json.dumps({"k": key, "f": digest}).encode()
            ).decode()
        return body, more

    def _list_transactions(self, q: dict[str, str]) -> httpx.Response:
        order = q.get("sortOrder", "desc")
        if order not in ("asc", "desc"):
            raise ValueError("sortOrder")
        start = parse_ns(q["startDate"]) if "startDate" in q else None
        end = parse_ns(q["endDate"]) if "endDate" in q else None
        status, kind = q.get("status"), q.get("type")
        if status is not None and status not in enum("TransactionStatus"):
            raise ValueError("status")
        if kind is not None and kind not in enum("TransactionType"):
            raise ValueError("type")
        rows = []
        for item in self.txs.values():
            r = item.record
            if item.visible_from > self.now:
                continue
            if start is not None and item.created_ns < start:
                continue
            if end is not None and item.created_ns > end:
                continue
            if kind is not None and r["type"] != kind:
                continue
            if status is not None:
                if r["status"] != status:
                    continue
                if r["type"] == "CARD" and not (
                    status == "REFUNDED" and self.habits.refunded_selects_cards
                ):
                    continue
            key = (
                (item.created_ns, _tie(r["id"]))
                if order == "asc"
                else (-item.created_ns, _inv(_tie(r["id"])))
            )
            rows.append((key, r))
        rows.sort(key=lambda x: x[0])
        total = len(rows)
        body, _ = self._page(q, rows)
        body["totalCount"] = total
        return self._reply(200, body)

    def _list_customers(self, q: dict[str, str]) -> httpx.Response:
        deleted = q.get("isIncludingDeleted", "false") == "true"
        bounds = {
            k: parse_ns(q[k])
            for k in ("createdAfter", "createdBefore", "updatedAfter", "updatedBefore")
            if k in q
        }
        rows = []
        for c in self.customers.values():
            if c["isDeleted"] and not deleted:
                continue
            created, updated = parse_ns(c["createdAt"]), parse_ns(c["updatedAt"])
            if "createdAfter" in bounds and created < bounds["createdAfter"]:
                continue
            if "createdBefore" in bounds and created > bounds["createdBefore"]:
                continue
            if "updatedAfter" in bounds and updated < bounds["updatedAfter"]:
                continue
            if "updatedBefore" in bounds and updated > bounds["updatedBefore"]:
                continue
            rows.append(((_tie(c["id"]),), c))  # an order of its own: by a hash of the id
        rows.sort(key=lambda x: x[0])
        body, _ = self._page(q, rows)
        body["totalCount"] = len(rows)
        return self._reply(200, body)

    def _list_plain(
        self, q: dict[str, str], records: list[dict[str, Any]], desc_default: bool = False
    ) -> httpx.Response:
        rows = sorted((((_tie(r["id"]),), r) for r in records), key=lambda x: x[0])
        body, _ = self._page(q, rows)
        body["totalCount"] = len(rows)
        return self._reply(200, body)


def _platform_external(seed: int) -> dict[str, dict[str, Any]]:
    """The platform's own external accounts (no customer), from a generator of their own so
    that the rest of the service's data does not move with them."""
    rng = random.Random(f"{seed}-platform")
    accounts = {}
    for _ in range(3):
        eid = f"ExternalAccount:{uuid.UUID(int=rng.getrandbits(128), version=4)}"
        accounts[eid] = {
            "id": eid,
            "status": "ACTIVE",
            "currency": "USD",
            "platformAccountId": f"ops-{rng.randrange(10**6):06d}",
            "accountInfo": {
                "accountType": "USD_ACCOUNT",
                "accountNumber": f"{rng.randrange(10**11, 10**12)}",
                "routingNumber": "021000021",
                "paymentRails": ["ACH"],
            },
        }
    return accounts


def _inv(tie: str) -> str:
    """A tie key that sorts the other way (for descending pages' keyset)."""
    return "".join(chr(255 - ord(c)) for c in tie)


def _match(record: dict[str, Any], q: dict[str, str], currency_field: str) -> bool:
    if "customerId" in q and record.get("customerId") != q["customerId"]:
        return False
    if "currency" in q:
        code = (
            record["balance"]["currency"]["code"]
            if currency_field == "balance"
            else record.get("currency")
        )
        if code != q["currency"]:
            return False
    return "type" not in q or record.get("type") == q["type"]


@contextmanager
def served(svc: SecondService) -> Iterator[str]:
    """`svc` answering real HTTP on 127.0.0.1; yields its base URL."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            port = self.server.server_address[1]
            request = httpx.Request(
                self.command,
                f"http://127.0.0.1:{port}{self.path}",
                headers=dict(self.headers.items()),
                content=body,
            )
            with lock:  # the service is one object, not thread-safe
                response = svc.handle(request)
            content = response.read()
            self.send_response(response.status_code)
            for name, value in response.headers.items():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_POST = do_PATCH = do_DELETE = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/2025-10-13"
    finally:
        server.shutdown()
        server.server_close()
