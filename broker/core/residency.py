"""Data-residency policies: the built-in named ones and inline policies from requests.

A site's ``jurisdictions`` (see ``pricing/snapshot/sites.csv``) are ``EU`` and/or
``EEA`` where applicable plus a national code: the ISO 3166-1 alpha-2 country code,
except ``UK`` for ``GB``. ``country`` is always the ISO2 code (``GB`` for the UK).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from broker.core.countries import ISO3166_ALPHA2
from broker.core.domain import ResidencyPolicy

INLINE_LABEL = "inline"
INLINE_KEYS = ("allowed_countries", "denied_countries", "allowed_jurisdictions")

_ISO2_RE = re.compile(r"^[A-Z]{2}$")
_JURISDICTION_RE = re.compile(r"^[A-Z]{2,3}$")
#: Two-letter codes that look like ISO2 but are not assigned country codes.
_NOT_ISO2 = {
    "UK": "the ISO 3166-1 code of the United Kingdom is GB",
    "EU": "EU is a jurisdiction; use allowed_jurisdictions",
}
#: Jurisdictions the catalog's sites carry (pricing.tco.jurisdictions): EU and EEA membership and
#: a national code, the country's ISO2 code except UK for GB (some sites carry GB).
KNOWN_JURISDICTIONS = frozenset({"EU", "EEA", "UK"}) | ISO3166_ALPHA2

#: Countries with an EU adequacy decision (Art. 45 GDPR), besides the EEA itself.
#: CA: commercial organisations under PIPEDA only. US: only organisations certified
#: under the EU-US Data Privacy Framework (adequacy decision of 10 July 2023); the large
#: cloud providers are certified, but the decision may be challenged.
GDPR_ADEQUATE_COUNTRIES = frozenset(
    {"CH", "GB", "CA", "JP", "KR", "IL", "NZ", "AR", "UY", "AD", "FO", "GG", "IM", "JE", "US"}
)


def _country_only(name: str, iso2: str, country: str) -> ResidencyPolicy:
    return ResidencyPolicy(
        name=name,
        allowed_countries=frozenset({iso2}),
        description=f"Data stays in {country} (sites whose country is {iso2}).",
    )


BUILTIN_POLICIES: dict[str, ResidencyPolicy] = {
    p.name: p
    for p in (
        ResidencyPolicy(
            name="gdpr-eu",
            allowed_jurisdictions=frozenset({"EEA"}),
            description="GDPR territory: sites in the European Economic Area (EU member states "
            "plus Iceland, Liechtenstein and Norway).",
        ),
        ResidencyPolicy(
            name="eu-only",
            allowed_jurisdictions=frozenset({"EU"}),
            description="Sites in an EU member state (excludes EEA-only Norway, Iceland, "
            "Liechtenstein, and Switzerland and the UK).",
        ),
        _country_only("us-only", "US", "the United States"),
        _country_only("uk-only", "GB", "the United Kingdom"),
        _country_only("canada-only", "CA", "Canada"),
        _country_only("switzerland-only", "CH", "Switzerland"),
        _country_only("australia-only", "AU", "Australia"),
        _country_only("india-only", "IN", "India"),
        _country_only("japan-only", "JP", "Japan"),
        _country_only("singapore-only", "SG", "Singapore"),
        _country_only("brazil-only", "BR", "Brazil"),
        _country_only("germany-only", "DE", "Germany"),
        ResidencyPolicy(
            name="gdpr-adequate",
            allowed_jurisdictions=frozenset({"EEA"}),
            allowed_countries=GDPR_ADEQUATE_COUNTRIES,
            description="EEA plus countries with an EU adequacy decision: Andorra, Argentina, "
            "Canada (commercial organisations, PIPEDA), Faroe Islands, Guernsey, Isle of Man, "
            "Israel, Japan, Jersey, New Zealand, Republic of Korea, Switzerland, United Kingdom, "
            "Uruguay, and the United States for organisations certified under the EU-US Data "
            "Privacy Framework (2023 decision; the major cloud providers are certified).",
        ),
        ResidencyPolicy(
            name="no-china",
            denied_countries=frozenset({"CN", "HK", "MO"}),
            description="Anywhere except mainland China and its special administrative regions "
            "Hong Kong and Macao (HK and MO are denied because PRC national-security law applies "
            "there).",
        ),
    )
}


def _codes(field: str, value: Any, pattern: re.Pattern[str], what: str, known: frozenset[str]) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValueError(f"residency.{field}: expected a list of {what}, got {type(value).__name__}")
    out: set[str] = set()
    for item in value:
        if pattern is _ISO2_RE and item in _NOT_ISO2:
            raise ValueError(f"residency.{field}: {item!r} is not {what} ({_NOT_ISO2[item]})")
        if not isinstance(item, str) or not pattern.match(item):
            hint = ""
            if isinstance(item, str) and pattern.match(item.upper()):
                hint = f" (codes are upper case: {item.upper()!r})"
            raise ValueError(f"residency.{field}: {item!r} is not {what}{hint}")
        if item not in known:  # well-formed but no such country: no site could ever match it
            raise ValueError(f"residency.{field}: {item!r} is not {what} (no such code)")
        out.add(item)
    return frozenset(out)


def resolve_policy(value: str | Mapping[str, Any]) -> ResidencyPolicy:
    """A built-in policy by name, or an inline policy from a mapping.

    Inline keys: ``allowed_countries`` and ``denied_countries`` (assigned ISO 3166-1
    alpha-2 codes, upper case) and ``allowed_jurisdictions`` (``EU``, ``EEA``, ``UK`` or an
    ISO 3166-1 alpha-2 code, e.g. ``US``).
    Raises ValueError naming the offending field.
    """
    if isinstance(value, ResidencyPolicy):
        return value
    if isinstance(value, str):
        policy = BUILTIN_POLICIES.get(value)
        if policy is None:
            known = ", ".join(sorted(BUILTIN_POLICIES))
            raise ValueError(f"residency: unknown policy {value!r}; known policies: {known}")
        return policy
    if not isinstance(value, Mapping):
        raise ValueError(f"residency: expected a policy name or an object, got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in INLINE_KEYS)
    if unknown:
        raise ValueError(f"residency: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(INLINE_KEYS)}")
    iso2 = "an ISO 3166-1 alpha-2 country code"
    allowed = _codes("allowed_countries", value.get("allowed_countries", ()), _ISO2_RE, iso2, ISO3166_ALPHA2)
    denied = _codes("denied_countries", value.get("denied_countries", ()), _ISO2_RE, iso2, ISO3166_ALPHA2)
    juris = _codes(
        "allowed_jurisdictions",
        value.get("allowed_jurisdictions", ()),
        _JURISDICTION_RE,
        "a jurisdiction code (EU, EEA, UK or a country's ISO 3166-1 alpha-2 code, e.g. US)",
        KNOWN_JURISDICTIONS,
    )
    both = sorted(allowed & denied)
    if both:
        raise ValueError(f"residency.denied_countries: {', '.join(both)} also listed in allowed_countries")
    return ResidencyPolicy(
        name=INLINE_LABEL,
        allowed_countries=allowed,
        denied_countries=denied,
        allowed_jurisdictions=juris,
        description="inline policy",
    )
