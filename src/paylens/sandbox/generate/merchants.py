"""The merchants card transactions are made at, and the memos of transfers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MEMOS = (
    "Invoice {n}", "Payroll batch {n}", "Supplier payment {n}", "Family support", "Rent",
    "Consulting fees", "Order {n}", "Marketplace payout {n}", "Tuition", "Savings transfer",
    "Contractor payout {n}", "Loan repayment", "Gift", "Subscription {n}",
)  # fmt: skip


@dataclass(frozen=True)
class Merchant:
    descriptor: str
    mcc: str
    country: str
    median_usd: float
    tips: bool
    popularity: float


MERCHANTS: tuple[Merchant, ...] = (
    Merchant("HARBOR COFFEE SF", "5814", "US", 8, True, 10),
    Merchant("QUICKEATS DELIVERY", "5812", "US", 32, True, 8),
    Merchant("GREENLEAF MARKET", "5411", "US", 85, False, 9),
    Merchant("RIVERSIDE FUEL 0412", "5541", "US", 55, False, 6),
    Merchant("CLOUDSHELF BOOKS", "5942", "US", 28, False, 3),
    Merchant("STREAMLY SUBSCRIPTION", "4899", "US", 15.5, False, 5),
    Merchant("SKYLINE AIRWAYS", "4511", "US", 420, False, 1.5),
    Merchant("GRAND MERIDIAN HOTEL", "7011", "US", 260, False, 1.5),
    Merchant("CITYRIDE TRIP", "4121", "US", 24, True, 6),
    Merchant("NORTHGATE GROCERS", "5411", "GB", 45, False, 4),
    Merchant("THE DAILY CRUST", "5814", "GB", 9, False, 4),
    Merchant("MARCHE CENTRAL", "5411", "FR", 60, False, 3),
    Merchant("MODA ATELIER", "5651", "ES", 70, False, 2),
    Merchant("APPHUB DIGITAL", "5735", "US", 12, False, 4),
    Merchant("TUNEWAVE MUSIC", "5815", "SE", 11, False, 3),
    Merchant("HOMEWORKS SUPPLY", "5200", "US", 120, False, 2),
    Merchant("NORDHAUS FURNITURE", "5712", "DE", 150, False, 1),
    Merchant("DEVCLOUD HOSTING", "4816", "US", 40, False, 2),
    Merchant("BISTRO LUMIERE", "5812", "FR", 75, True, 3),
    Merchant("PHARMA PLUS", "5912", "US", 22, False, 3),
)


MERCHANT_POPULARITY = np.array([m.popularity for m in MERCHANTS])
MERCHANT_MEDIAN = np.array([m.median_usd for m in MERCHANTS])
MERCHANT_TIPS = np.array([m.tips for m in MERCHANTS])
