"""The world's quotes and exchange rates: a quote is an OUTGOING row in PENDING until it is
executed or expires (see `world.world`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..clock import whole_ms
from ..currencies import (
    AUTO_CHANNEL,
    CANCEL_WINDOW_S,
    CHANNEL_INDEX,
    COUNTERPARTY_FEE_USD,
    CRYPTO_CODES,
    CURRENCY_CODES,
    CURRENCY_GROUP,
    CURRENCY_INDEX,
    DECIMALS,
    INSTANT,
    N_RAILS,
    QUOTE_SPREAD,
    QUOTE_TTL_S,
    RATE_BY_GROUP,
    RECEIVE_OPTIONS,
    SERVICE_FEE_USD,
    TIMELINE_S,
    currency_wire,
    to_minor,
)
from ..errors import ServiceError, invalid
from ..generate.entities import (
    new_uuids,
    parse_uuid,
)
from ..generate.money import outgoing_money, platform_fee
from ..generate.schema import (
    AWAITING_APPROVAL,
    DEST_ACCOUNT,
    DEST_UMA,
    NEVER,
    OUT_FAILURE_CODE,
    OUTGOING,
    SRC_ACCOUNT,
    SRC_FUNDING,
    STATUS_CODE,
    STATUSES,
    empty_columns,
    status_at,
)
from ..midrates import mid_rates
from .base import WorldBase
from .entities import iso1
from .render import quote_uuid


class QuoteRequest:
    """A checked POST /quotes body: account rows, amounts and options."""

    def __init__(
        self,
        source: int,
        destination: int,
        locked_side: str,
        amount: int,
        *,
        rail: str | None = None,
        execute: bool = False,
        description: str | None = None,
        fee_override: tuple[int, int] | None = None,
        funding: tuple[int, int] | None = None,
        uma: tuple[int, int] | None = None,
    ) -> None:
        self.source = source  # NO_ROW for a REALTIME_FUNDING source
        self.funding = funding  # (customer row, currency code) of a REALTIME_FUNDING source
        self.uma = uma  # (person row, currency code) of a UMA_ADDRESS destination (NO_ROW dst)
        self.destination = destination
        self.locked_side = locked_side
        self.amount = amount
        self.rail = rail
        self.execute = execute
        self.description = description
        self.fee_override = fee_override


_DAY_US = 86_400_000_000


class QuoteOps(WorldBase):
    """The quote and exchange-rate operations of `World`.

    A quote holds its rate until it expires, unless the market moves past it: executed on a
    later UTC day whose mid rate is above the quote's `exchangeRate` (the spread no longer
    covers the move), the transaction fails with QUOTE_RATE_UNAVAILABLE and nothing is
    exchanged; the execute answers the FAILED quote, and a new quote is needed.
    """

    def _mid(self, sending: int, receiving: int) -> float:
        """Today's mid rate of a corridor (see `midrates`)."""
        return float(mid_rates(self.seed, self._now, sending, receiving))

    def quote_row(self, quote_id: str) -> int:
        prefix, _, text = quote_id.partition(":")
        parsed = parse_uuid(text) if prefix == "Quote" else None
        if parsed is not None:
            hi, lo = quote_uuid(*parsed)
            for row in self.store.rows_by_hi(hi).tolist():
                if int(self.store.col("lo")[row]) == lo and self.store.col("kind")[row] == OUTGOING:
                    return int(row)
        raise ServiceError(404, "QUOTE_NOT_FOUND", f"no quote {quote_id}")

    def get_quote(self, quote_id: str) -> dict[str, Any]:
        return self.tx.quote(self.quote_row(quote_id), self._now)

    def execute_quote(self, quote_id: str) -> dict[str, Any]:
        row = self.quote_row(quote_id)
        s = self.store
        if s.col("source_kind")[row] == SRC_FUNDING:
            raise invalid(
                [
                    {
                        "field": "quoteId",
                        "message": "a REALTIME_FUNDING quote executes when its funds arrive",
                    }
                ],
                "the quote cannot be executed: send its funds as its paymentInstructions say",
            )
        if (
            self._status(row) != STATUS_CODE["PENDING"]
            or s.col("flags")[row] & AWAITING_APPROVAL
            or s.col("t1")[row] <= self._now
        ):
            raise ServiceError(
                409,
                "CONFLICT",
                f"the quote is {STATUSES[self._status(row)]}, not waiting for execution",
            )
        sending, receiving = int(s.col("send_cur")[row]), int(s.col("recv_cur")[row])
        if self._mid(sending, receiving) > float(s.col("fx")[row]):
            self._fail_now(row, OUT_FAILURE_CODE["QUOTE_RATE_UNAVAILABLE"])
        else:
            self._execute(row)
        return self.tx.quote(row, self._now)

    def create_quote(self, req: QuoteRequest) -> dict[str, Any]:
        """A quote from `req` (already validated by the route) as a new OUTGOING row."""
        e = self.entities
        acc = e.accounts
        src, dst = req.source, req.destination
        recv_cur = int(acc.currency[dst]) if req.uma is None else req.uma[1]
        if req.funding is not None:
            owner, send_cur = req.funding
        else:
            send_cur, owner = int(acc.currency[src]), int(acc.owner[src])
        if req.uma is not None:
            channel, rail_mode = CHANNEL_INDEX["UMA"], 0
        elif acc.external[dst]:
            option = int(acc.kind[dst])
            channel = CHANNEL_INDEX[req.rail] if req.rail else int(AUTO_CHANNEL[option])
            rail_mode = 2 if req.rail else (1 if channel < N_RAILS else 0)
        else:
            channel, rail_mode = CHANNEL_INDEX["INTERNAL"], 0
        same = send_cur == recv_cur
        group = int(CURRENCY_GROUP[recv_cur])
        fx = (
            1.0
            if same
            else float(f"{self._mid(send_cur, recv_cur) * (1.0 + QUOTE_SPREAD[group]):.8g}")
        )
        var_rate = 0.0 if same else float(RATE_BY_GROUP[group, int(e.customers.kind[owner])])
        fixed = int(to_minor(SERVICE_FEE_USD[channel], send_cur))
        cpty = 0 if same else int(to_minor(COUNTERPARTY_FEE_USD[channel], recv_cur))
        bps, plat_fixed, cross = self._platform_fee_terms(req, send_cur, same)

        def money(sent: int) -> tuple[int, int, int, int]:
            a = np.array([sent], dtype=np.int64)
            plat = platform_fee(a, np.array([cross]), bps, plat_fixed)
            v, fees, received = outgoing_money(
                a,
                np.array([send_cur]),
                np.array([recv_cur]),
                np.array([fx]),
                np.array([var_rate]),
                np.array([fixed]),
                plat,
                np.array([cpty]),
            )
            return int(v[0]), int(fees[0]), int(received[0]), int(plat[0])

        sent = (
            req.amount
            if req.locked_side == "SENDING"
            else self._sent_for(req.amount, money, send_cur, recv_cur, fx, var_rate, bps)
        )
        var_fee, fees, received, plat = money(sent)
        if received <= 0:
            raise ServiceError(
                400,
                "AMOUNT_OUT_OF_RANGE",
                f"{sent} minor units of {CURRENCY_CODES[send_cur]} do not cover the fees of {fees}",
            )
        created = max(
            whole_ms(self._now), int(self.store.col("created")[-1]) + 1000 if self.store.n else 0
        )
        self._now = max(self._now, created)
        cols = empty_columns(1)
        hi, lo = new_uuids(self._calls, 1)
        ttl = int(QUOTE_TTL_S[channel]) * 1_000_000
        window = CANCEL_WINDOW_S.get(channel)
        values: dict[str, Any] = {
            "hi": hi[0], "lo": lo[0], "kind": OUTGOING, "created": created, "customer": owner,
            "sender": src, "receiver": dst, "send_cur": send_cur, "recv_cur": recv_cur, "sent": sent,
            "received": received, "fees": fees, "fixed_fee": fixed, "var_fee": var_fee,
            "platform_fee": plat, "cpty_fee": cpty, "var_rate": var_rate, "fx": fx,
            "channel": channel, "rail_mode": rail_mode,
            "person": acc.person[dst] if req.uma is None else req.uma[0],
            "dest_kind": DEST_ACCOUNT if req.uma is None else DEST_UMA,
            "t1": created + ttl, "t2": created + ttl, "final": STATUS_CODE["EXPIRED"],
            "timeline": -1 if req.funding else TIMELINE_S[channel],
            "expected": NEVER if INSTANT[channel] or req.funding else created + int(TIMELINE_S[channel]) * 1_000_000,
            "source_kind": SRC_FUNDING if req.funding else SRC_ACCOUNT,
            "cancel_by": created + sum(window) * 500_000 if window else 0,
        }  # fmt: skip
        for name, value in values.items():
            cols[name][0] = value
        cols["status"] = status_at(cols, self._now)
        row = int(self.store.append(cols, self._now)[0])
        self.tx.describe(row, req.description)
        self.announce_new(row)
        if req.execute:
            self._execute(row)
        return self.tx.quote(row, self._now)

    def _platform_fee_terms(
        self, req: QuoteRequest, send_cur: int, same: bool
    ) -> tuple[int, int, bool]:
        if req.fee_override is not None:
            bps, fixed = req.fee_override
            return bps, fixed, True
        fee_cur, bps, fixed = self.fee_config
        return bps, fixed, send_cur == fee_cur and not same

    @staticmethod
    def _sent_for(
        target: int, money: Any, send_cur: int, recv_cur: int, fx: float, var_rate: float, bps: int
    ) -> int:
        """The smallest sending amount whose received amount reaches `target`."""
        scale = 10.0 ** (int(DECIMALS[send_cur]) - int(DECIMALS[recv_cur]))
        _, fees0, _, _ = money(0)
        guess = int((target * fx * scale + max(fees0, 0)) / max(1.0 - var_rate - bps / 10_000, 0.5))
        low, high = max(guess // 2, 1), max(guess * 2, 16)
        while money(high)[2] < target:
            high *= 2
        while low < high:
            mid = (low + high) // 2
            if money(mid)[2] >= target:
                high = mid
            else:
                low = mid + 1
        return low

    def exchange_rates(
        self, source: str | None, destinations: list[str], amount: int
    ) -> list[dict[str, Any]]:
        """Corridors from each currency customers hold to each bank destination, at today's
        mid rates, with the fees of the formula for `amount` (an individual's rates)."""
        fee_cur, bps, fixed_plat = self.fee_config
        updated = iso1(self._now - self._now % _DAY_US)  # the day's fixing
        sources = sorted({c for cs in self.entities.customers.currencies for c in cs})
        out = []
        for s in sources:
            if source is not None and CURRENCY_CODES[s] != source:
                continue
            for option in RECEIVE_OPTIONS:
                r = CURRENCY_INDEX[option.currency]
                if (
                    r == s
                    or option.currency in CRYPTO_CODES
                    or (destinations and option.currency not in destinations)
                ):
                    continue
                for rail, _ in option.rails:
                    ch = CHANNEL_INDEX[rail]
                    fixed = int(to_minor(SERVICE_FEE_USD[ch], s))
                    cpty = int(to_minor(COUNTERPARTY_FEE_USD[ch], r))
                    a = np.array([amount], dtype=np.int64)
                    plat = platform_fee(a, np.array([s == fee_cur]), bps, fixed_plat)
                    rate = self._mid(s, r)
                    _, fees, received = outgoing_money(
                        a,
                        np.array([s]),
                        np.array([r]),
                        np.array([rate]),
                        np.array([RATE_BY_GROUP[CURRENCY_GROUP[r], 0]]),
                        np.array([fixed]),
                        plat,
                        np.array([cpty]),
                    )
                    fees_total = int(fees[0])
                    out.append({
                        "sourceCurrency": currency_wire(s), "sendingAmount": amount,
                        "minSendingAmount": int(to_minor(1.0, s)), "maxSendingAmount": int(to_minor(250_000.0, s)),
                        "destinationCurrency": currency_wire(r), "destinationPaymentRail": rail,
                        "receivingAmount": max(int(received[0]), 0), "exchangeRate": rate,
                        "fees": {"fixed": fixed + (fixed_plat if s == fee_cur else 0), "total": fees_total},
                        "updatedAt": updated,
                    })  # fmt: skip
        return out
