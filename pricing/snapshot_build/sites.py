"""`sites.csv`: public regions with their country, jurisdictions, coordinates and carbon; AWS edge zones."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

from pricing.snapshot_build.carbon import ccf_factors, gcp_carbon
from pricing.snapshot_build.common import Report, dec_str, read_csv_str

# AWS zone code: <parent>-<metro>-<n> (Local Zone) or <parent>-wl<k>-<metro><n> (Wavelength).
AWS_PARENT_RE = re.compile(r"^(?:[a-z]{2}|us-gov)-[a-z]+-\d$")
AWS_LOCAL_ZONE_RE = re.compile(r"^(?P<parent>[a-z]{2}-[a-z]+-\d)-(?P<metro>[a-z]{3})-\d+$")
AWS_WAVELENGTH_RE = re.compile(r"^(?P<parent>[a-z]{2}-[a-z]+-\d)-wl\d+-(?P<metro>[a-z]{3})\d+$")


def national_code(iso2: str) -> str:
    return "UK" if iso2 == "GB" else iso2


def load_eea(data: Path) -> dict[str, tuple[bool, bool]]:
    df = read_csv_str(data / "regions" / "eea_countries_2021-01-01.csv")
    out: dict[str, tuple[bool, bool]] = {}
    for r in df.itertuples(index=False):
        out[str(r.iso2c)] = (str(r.eu27).upper() == "TRUE", str(r.eea).upper() == "TRUE")
    return out


def jurisdictions(iso2: str, in_eu: bool, in_eea: bool) -> str:
    parts = []
    if in_eu:
        parts.append("EU")
    if in_eea:
        parts.append("EEA")
    parts.append(national_code(iso2))
    return ";".join(parts)


def gcp_zone_to_region(region: str) -> str:
    m = re.fullmatch(r"(.+-\w+\d+)-[a-z]", region)
    return m.group(1) if m else region


def build_sites(data: Path, rep: Report) -> list[dict[str, str]]:
    regions = read_csv_str(data / "regions" / "regions.csv")
    eea = load_eea(data)
    reg: dict[tuple[str, str], dict[str, str]] = {
        (str(r["provider"]), str(r["region"])): {k: str(v) for k, v in r.items()} for r in regions.to_dict("records")
    }
    aws = read_csv_str(data / "pricing" / "aws_ec2_linux_prices.csv")
    azure = read_csv_str(data / "pricing" / "azure_vms.csv")
    gcp = read_csv_str(data / "pricing" / "gcp_vms.csv")

    aws_locs = sorted(set(aws["region"]))
    aws_parents = [r for r in aws_locs if AWS_PARENT_RE.match(r)]
    aws_zones = [r for r in aws_locs if not AWS_PARENT_RE.match(r)]
    public: list[tuple[str, str]] = [("aws", r) for r in aws_parents]
    public += [("azure", r) for r in sorted(set(azure["Region"]))]
    public += [("gcp", r) for r in sorted(set(gcp["Region"]))]

    carbon_aws = ccf_factors(data / "carbon" / "ccf_grid_emissions_factors_aws.csv", rep)
    carbon_az_by_name = ccf_factors(data / "carbon" / "ccf_grid_emissions_factors_azure.csv", rep)
    az_name_to_code = {v["display_name"]: k[1] for k, v in reg.items() if k[0] == "azure" and v["display_name"]}
    carbon_az: dict[str, tuple[Decimal, str]] = {}
    for name, val in carbon_az_by_name.items():
        code = az_name_to_code.get(name)
        if code is None and ("azure", name.lower().replace(" ", "")) in reg:
            code = name.lower().replace(" ", "")  # e.g. "Finland Central" -> finlandcentral
        if code is None:
            rep.note(f"carbon: azure CCF display name {name!r} not in regions.csv, unused")
            continue
        carbon_az[code] = val
    carbon_gcp = gcp_carbon(data)

    sites: list[dict[str, str]] = []
    for provider, region in public:
        meta = reg.get((provider, region))
        if meta is None or not meta["country_iso2"] or not meta["lat"] or not meta["lon"]:
            rep.note(f"sites: skipped {provider}:{region} (no country/coordinates in regions.csv)")
            continue
        iso2 = meta["country_iso2"]
        carbon, source = "", ""
        if provider == "gcp" and region in carbon_gcp:
            gval, year = carbon_gcp[region]
            carbon, source = dec_str(gval), f"gcp_region_carbon_{year}.csv (Google, {year})"
        elif provider == "aws" and region in carbon_aws:
            carbon = dec_str(carbon_aws[region][0])
            source = "ccf_grid_emissions_factors_aws.csv (CCF, 2023-05)"
        elif provider == "azure" and region in carbon_az:
            aval, note = carbon_az[region]
            carbon = dec_str(aval)
            source = "ccf_grid_emissions_factors_azure.csv (CCF, 2023-05)" + ("; repaired row" if note else "")
        sites.append(
            {
                "id": f"{provider}:{region}",
                "provider": provider,
                "kind": "public",
                "region": region,
                "name": meta["display_name"],
                "country": iso2,
                "jurisdictions": jurisdictions(iso2, meta["in_eu"].lower() == "true", meta["in_eea"].lower() == "true"),
                "lat": meta["lat"],
                "lon": meta["lon"],
                "carbon_g_per_kwh": carbon,
                "carbon_source": source,
            }
        )

    metros = read_csv_str(Path(__file__).parents[1] / "aws_zone_metros.csv")
    metro = {str(r["metro"]): {k: str(v) for k, v in r.items()} for r in metros.to_dict("records")}
    for zone in aws_zones:
        m = AWS_WAVELENGTH_RE.match(zone)
        kind_name = "Wavelength Zone"
        if m is None:
            m = AWS_LOCAL_ZONE_RE.match(zone)
            kind_name = "Local Zone"
        if m is None:
            rep.note(f"sites: skipped aws:{zone} (zone code names no metro)")
            continue
        info = metro.get(m.group("metro"))
        if info is None:
            rep.note(f"sites: skipped aws:{zone} (metro '{m.group('metro')}' not placed with confidence)")
            continue
        iso2 = info["country_iso2"]
        in_eu, in_eea = eea.get(iso2, (False, False))
        sites.append(
            {
                "id": f"aws:{zone}",
                "provider": "aws",
                # a zone of a public cloud, bought as the region's nodes are: `public`. The contract's
                # `edge` is an owned site of fixed capacity, `edge:<name>` (its name says the zone)
                "kind": "public",
                "region": zone,
                "name": f"AWS {kind_name} ({info['city']}), parent {m.group('parent')}",
                "country": iso2,
                "jurisdictions": jurisdictions(iso2, in_eu, in_eea),
                "lat": info["lat"],
                "lon": info["lon"],
                "carbon_g_per_kwh": "",
                "carbon_source": "",
            }
        )
    sites.sort(key=lambda s: s["id"])
    return sites
