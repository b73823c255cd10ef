"""The platform's own resources in the world: its config, and customers and accounts by id."""

from __future__ import annotations

from typing import Any

from ..currencies import (
    CURRENCY_CODES,
    to_minor,
)
from ..errors import ServiceError
from ..generate.entities import (
    US_PER_DAY,
)
from .base import WorldBase
from .entities import SANDBOX_DOMAIN, iso1


class PlatformOps(WorldBase):
    """The platform, customer and account lookups of `World`."""

    def platform_config(self) -> dict[str, Any]:
        fee_cur, bps, fixed = self.fee_config
        created = iso1(self._start - 800 * US_PER_DAY)
        return {
            "id": self.config_id,
            "umaDomain": SANDBOX_DOMAIN,
            "webhookEndpoint": f"https://hooks.{SANDBOX_DOMAIN}/webhooks",
            "supportedCurrencies": [
                {
                    "currencyCode": code,
                    "minAmount": int(to_minor(1.0, i)),
                    "maxAmount": int(to_minor(250_000.0, i)),
                    "requiredCounterpartyFields": [],
                    "enabledTransactionTypes": ["INCOMING", "OUTGOING"],
                }
                for i, code in enumerate(CURRENCY_CODES)
            ],
            "isRegulatedFinancialInstitution": False,
            "embeddedWalletConfig": {
                "appName": "Paylens Sandbox",
                "otpLength": 6,
                "alphanumeric": False,
                "expirationSeconds": 300,
                "sendFromEmailAddress": f"wallet@{SANDBOX_DOMAIN}",
                "sendFromEmailSenderName": "Paylens Sandbox",
            },
            "feeConfigs": [
                {
                    "feeType": "CROSS_CURRENCY_TRANSACTION",
                    "sourceCurrency": CURRENCY_CODES[fee_cur],
                    "variableFeeBps": bps,
                    "fixedFee": {"amount": fixed, "currency": CURRENCY_CODES[fee_cur]},
                }
            ],
            "createdAt": created,
            "updatedAt": created,
        }

    def customer_row(self, customer_id: str) -> int:
        row = self.entities.customer_index.get(customer_id)
        if row is None:
            raise ServiceError(404, "USER_NOT_FOUND", f"no customer {customer_id}")
        return row

    def account_row(self, account_id: str) -> int:
        row = self.entities.account_index.get(account_id)
        if row is None:
            raise ServiceError(404, "REFERENCE_NOT_FOUND", f"no account {account_id}")
        return row
