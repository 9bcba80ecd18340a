from __future__ import annotations

from typing import Any

import pytest

from broker.core.domain import Site, SiteKind
from broker.core.residency import BUILTIN_POLICIES, resolve_policy


def site(country: str, *juris: str) -> Site:
    return Site(
        id=f"t:{country}",
        provider="aws",
        kind=SiteKind.PUBLIC,
        region="r",
        country=country,
        jurisdictions=tuple(juris),
        lat=0.0,
        lon=0.0,
    )


DE = site("DE", "EU", "EEA", "DE")
NO = site("NO", "EEA", "NO")
GB = site("GB", "UK")
CH = site("CH", "CH")
US = site("US", "US")
JP = site("JP", "JP")
CN = site("CN", "CN")
HK = site("HK", "HK")
SG = site("SG", "SG")
BR = site("BR", "BR")
IN = site("IN", "IN")


@pytest.mark.parametrize(
    ("policy", "s", "allowed"),
    [
        ("gdpr-eu", DE, True),
        ("gdpr-eu", NO, True),
        ("gdpr-eu", GB, False),
        ("gdpr-eu", CH, False),
        ("gdpr-eu", US, False),
        ("eu-only", DE, True),
        ("eu-only", NO, False),
        ("eu-only", GB, False),
        ("us-only", US, True),
        ("us-only", DE, False),
        ("uk-only", GB, True),
        ("uk-only", DE, False),
        ("switzerland-only", CH, True),
        ("switzerland-only", DE, False),
        ("germany-only", DE, True),
        ("germany-only", NO, False),
        ("japan-only", JP, True),
        ("singapore-only", SG, True),
        ("brazil-only", BR, True),
        ("india-only", IN, True),
        ("india-only", SG, False),
        ("gdpr-adequate", DE, True),
        ("gdpr-adequate", NO, True),
        ("gdpr-adequate", GB, True),
        ("gdpr-adequate", CH, True),
        ("gdpr-adequate", US, True),
        ("gdpr-adequate", JP, True),
        ("gdpr-adequate", CN, False),
        ("gdpr-adequate", SG, False),
        ("gdpr-adequate", BR, False),
        ("no-china", CN, False),
        ("no-china", HK, False),
        ("no-china", US, True),
        ("no-china", DE, True),
    ],
)
def test_builtin_allow_deny(policy: str, s: Site, allowed: bool) -> None:
    assert resolve_policy(policy).allows(s) is allowed


def test_all_builtins_described() -> None:
    for name, p in BUILTIN_POLICIES.items():
        assert p.name == name and p.description


@pytest.mark.parametrize(
    ("inline", "s", "allowed"),
    [
        ({"allowed_countries": ["DE", "FR"]}, DE, True),
        ({"allowed_countries": ["FR"]}, DE, False),
        ({"allowed_jurisdictions": ["EU"], "denied_countries": ["DE"]}, DE, False),
        ({"allowed_jurisdictions": ["UK"]}, GB, True),
        ({"denied_countries": ["CN"]}, US, True),
        ({}, CN, True),
    ],
)
def test_inline(inline: dict[str, Any], s: Site, allowed: bool) -> None:
    p = resolve_policy(inline)
    assert p.allows(s) is allowed
    assert p.name == "inline"


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"allowed_countries": ["de"]}, "allowed_countries"),
        ({"allowed_countries": ["UK"]}, "allowed_countries"),
        ({"allowed_countries": "DE"}, "allowed_countries"),
        ({"denied_countries": ["DEU"]}, "denied_countries"),
        ({"allowed_jurisdictions": ["eu"]}, "allowed_jurisdictions"),
        # well-formed but no such country: refused, not answered as infeasible
        ({"allowed_countries": ["XX"]}, "allowed_countries"),
        ({"denied_countries": ["ZZ"]}, "denied_countries"),
        ({"allowed_jurisdictions": ["XX"]}, "allowed_jurisdictions"),
        ({"allowed_jurisdictions": ["EUR"]}, "allowed_jurisdictions"),
        ({"allowed_countries": ["DE"], "denied_countries": ["DE"]}, "denied_countries"),
        ({"regions": ["eu"]}, "regions"),
        ("no-such-policy", "no-such-policy"),
        (42, "residency"),
    ],
)
def test_invalid_inline_names_field(value: Any, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        resolve_policy(value)


@pytest.mark.parametrize(
    "inline",
    [
        # every assigned code, including ones without a site, and every jurisdiction sites carry
        {"allowed_countries": ["DE", "GB", "US", "AQ", "VA", "SS", "BQ"]},
        {"denied_countries": ["CN", "HK", "MO", "RU", "KP"]},
        {"allowed_jurisdictions": ["EU", "EEA", "UK", "GB", "US", "CH", "NO"]},
    ],
)
def test_inline_accepts_assigned_codes(inline: dict[str, Any]) -> None:
    assert resolve_policy(inline).name == "inline"


def test_country_list_is_iso_3166_alpha_2() -> None:
    from broker.core.countries import ISO3166_ALPHA2

    assert len(ISO3166_ALPHA2) == 249
    assert all(len(c) == 2 and c.isupper() for c in ISO3166_ALPHA2)
    assert {"UK", "EU", "XK", "XX", "ZZ"}.isdisjoint(ISO3166_ALPHA2)
    # every country of the bundled sites is a code of the list
    import csv
    from pathlib import Path

    sites = Path(__file__).resolve().parents[3] / "pricing" / "snapshot" / "sites.csv"
    with sites.open() as f:
        assert {row["country"] for row in csv.DictReader(f)} <= ISO3166_ALPHA2
