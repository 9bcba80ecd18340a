"""Prices of owned capacity: private data-centre TCO and flat-rate edge nodes.

Pure arithmetic, the formula of ``../shared/spec/cli-and-files.md``:

    price per node-hour = hardware_usd / amortization_months / 730      (capital, straight line)
                        + power_kw * pue * usd_per_kwh                   (energy, incl. cooling)
                        + monthly_usd / 730                              (space, network, operations)

A flat node type (edge sites rented per node) costs ``flat_monthly_usd / 730`` per node-hour.
730 is the hours in an average month (8760 / 12), the same constant the solver uses.
"""

from __future__ import annotations

from dataclasses import dataclass

HOURS_PER_MONTH = 730.0

#: EU member states (2021-01-01 list of ../shared/data/regions/eea_countries_2021-01-01.csv,
#: unchanged since) and the three EEA-only states.
EU_COUNTRIES = frozenset(
    {
        "AT",
        "BE",
        "BG",
        "CY",
        "CZ",
        "DE",
        "DK",
        "EE",
        "ES",
        "FI",
        "FR",
        "GR",
        "HR",
        "HU",
        "IE",
        "IT",
        "LT",
        "LU",
        "LV",
        "MT",
        "NL",
        "PL",
        "PT",
        "RO",
        "SE",
        "SI",
        "SK",
    }
)
EEA_COUNTRIES = EU_COUNTRIES | {"IS", "LI", "NO"}


@dataclass(frozen=True, slots=True)
class Tco:
    hardware_usd: float
    amortization_months: float
    power_kw: float
    pue: float
    usd_per_kwh: float
    monthly_usd: float = 0.0

    def capital_per_hour(self) -> float:
        return self.hardware_usd / self.amortization_months / HOURS_PER_MONTH

    def energy_per_hour(self) -> float:
        return self.power_kw * self.pue * self.usd_per_kwh

    def operations_per_hour(self) -> float:
        return self.monthly_usd / HOURS_PER_MONTH

    def price_per_node_hour(self) -> float:
        return self.capital_per_hour() + self.energy_per_hour() + self.operations_per_hour()


def flat_price_per_node_hour(flat_monthly_usd: float) -> float:
    return flat_monthly_usd / HOURS_PER_MONTH


def jurisdictions(country: str) -> tuple[str, ...]:
    """Jurisdiction labels as the catalog uses them: EU/EEA membership, then the national code
    (``UK`` for ``GB``, as in pricing/snapshot/sites.csv)."""
    out: list[str] = []
    if country in EU_COUNTRIES:
        out.append("EU")
    if country in EEA_COUNTRIES:
        out.append("EEA")
    out.append("UK" if country == "GB" else country)
    return tuple(out)
