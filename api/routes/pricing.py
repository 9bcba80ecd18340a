"""Pricing endpoints: refresh jobs and price history."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/v1", tags=["pricing"])
