"""Customers: individuals and businesses, told apart by `customerType`.

Only the fields analysts use are typed; the rest of the profile (identity documents, source of
funds, beneficial owners' details, ...) stays readable in `model_extra` and round-trips.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from pydantic import Tag

from ._base import FALLBACK_TAG, OpenEnum, UtcDatetime, WireModel, tag_by
from .enums import CustomerType, KycStatus

__all__ = [
    "Address",
    "BusinessCustomer",
    "Customer",
    "CustomerBase",
    "IndividualCustomer",
    "UnknownCustomer",
]


class Address(WireModel):
    line1: str | None = None
    line2: str | None = None
    city: str | None = None
    state: str | None = None
    postal_code: str | None = None
    country: str | None = None


class CustomerBase(WireModel):
    """Fields of every customer; `platform_customer_id` is the platform's own id for it."""

    id: str | None = None
    platform_customer_id: str
    customer_type: str
    uma_address: str | None = None
    region: str | None = None
    currencies: list[str] | None = None
    email: str | None = None
    phone_number: str | None = None
    address: Address | None = None
    end_user_terms_consent: dict[str, Any] | None = None
    is_deleted: bool | None = None
    created_at: UtcDatetime | None = None
    updated_at: UtcDatetime | None = None


class IndividualCustomer(CustomerBase):
    customer_type: OpenEnum[CustomerType] = CustomerType.INDIVIDUAL
    kyc_status: OpenEnum[KycStatus] | None = None
    full_name: str | None = None
    birth_date: date | None = None
    nationality: str | None = None


class BusinessCustomer(CustomerBase):
    customer_type: OpenEnum[CustomerType] = CustomerType.BUSINESS
    kyb_status: OpenEnum[KycStatus] | None = None
    business_info: dict[str, Any] | None = None
    beneficial_owners: list[dict[str, Any]] | None = None


class UnknownCustomer(CustomerBase):
    """A `customerType` this version does not know; its other fields are in `model_extra`."""


Customer = Annotated[
    Annotated[IndividualCustomer, Tag(CustomerType.INDIVIDUAL)]
    | Annotated[BusinessCustomer, Tag(CustomerType.BUSINESS)]
    | Annotated[UnknownCustomer, Tag(FALLBACK_TAG)],
    tag_by("customerType", CustomerType),
]
"""Any customer, the variant chosen by `customerType`."""
