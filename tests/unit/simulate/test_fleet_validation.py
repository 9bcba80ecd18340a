"""Bad fleets are refused with an error naming the field (the CLI exits 2 on these)."""

from __future__ import annotations

from typing import Any

import pytest

from broker.errors import InvalidRequest
from broker.simulate.fleet import parse_fleet
from broker.simulate.market import build_market
from broker.simulate.run import check_policies, run_simulation
from broker.simulate.usage import build_usage


def _locs(exc: pytest.ExceptionInfo[InvalidRequest]) -> list[list[Any]]:
    return [list(e["loc"]) for e in exc.value.errors]


def test_negative_size_names_the_field(fleet_doc):
    fleet_doc["workloads"][1]["cpu"] = -1
    with pytest.raises(InvalidRequest) as exc:
        parse_fleet(fleet_doc)
    assert ["workloads", 1, "cpu"] in _locs(exc)
    assert "workloads.1.cpu" in exc.value.detail


def test_unknown_tenant_dependency_and_region(fleet_doc):
    fleet_doc["workloads"][0]["tenant"] = "nobody"
    fleet_doc["workloads"][0]["depends_on"] = [{"workload": "ghost", "gib_per_hour": 1}]
    fleet_doc["workloads"][0]["latency_slo_ms"] = {"mars": 10}
    with pytest.raises(InvalidRequest) as exc:
        parse_fleet(fleet_doc)
    locs = _locs(exc)
    assert ["workloads", 0, "tenant"] in locs
    assert ["workloads", 0, "depends_on", 0, "workload"] in locs
    assert ["workloads", 0, "latency_slo_ms", "mars"] in locs


def test_usage_needs_one_source(fleet_doc):
    fleet_doc["workloads"][0]["usage"] = {"series": "az1633748", "cpu": [1.0]}
    with pytest.raises(InvalidRequest) as exc:
        parse_fleet(fleet_doc)
    assert ["workloads", 0, "usage"] in _locs(exc)


def test_unknown_series(fleet_doc, traces):
    fleet_doc["workloads"][2]["usage"]["series"] = "nope"
    fleet = parse_fleet(fleet_doc)
    with pytest.raises(InvalidRequest) as exc:
        build_usage(fleet, traces, days=0.5)
    assert _locs(exc) == [["workloads", 2, "usage", "series"]]
    assert "nope" in exc.value.errors[0]["msg"]


def test_longer_than_the_history(fleet_doc, traces):
    fleet = parse_fleet(fleet_doc)
    with pytest.raises(InvalidRequest) as exc:
        build_usage(fleet, traces, days=8)  # 7 days of history + 8 > the 14 days of the traces
    assert ["days"] in _locs(exc)
    assert "longer than the history" in exc.value.detail


def test_inline_usage_too_short(fleet_doc, traces):
    fleet_doc["workloads"][0]["usage"] = {"cpu": [1.0] * 10}
    fleet = parse_fleet(fleet_doc)
    with pytest.raises(InvalidRequest) as exc:
        build_usage(fleet, traces, days=0.5)
    assert _locs(exc) == [["workloads", 0, "usage", "cpu"]]


def test_unknown_sites(fleet_doc, parts):
    fleet_doc["sites"].append("aws:atlantis-1")
    fleet_doc["events"]["site_outage"]["site"] = "gcp:nowhere"
    fleet_doc["policies"]["kube-default"]["site"] = "aws:moon-1"
    with pytest.raises(InvalidRequest) as exc:
        build_market(parse_fleet(fleet_doc), parts)
    locs = _locs(exc)
    assert ["sites", 3] in locs
    assert ["events", "site_outage", "site"] in locs
    assert ["policies", "kube-default", "site"] in locs


def test_unknown_instance_type(fleet_doc, parts, traces):
    fleet_doc["policies"]["kube-default"]["instance_type"] = "m99.huge"
    with pytest.raises(InvalidRequest) as exc:
        run_simulation(parse_fleet(fleet_doc), parts, traces, policies=["kube-default"])
    assert _locs(exc) == [["policies", "kube-default", "instance_type"]]


def test_a_workload_larger_than_the_node_groups_allocatable_is_refused(fleet_doc, parts, traces):
    """8 GiB on an m5.large: its raw size, but EKS and the DaemonSets keep 0.9 GiB of it; the pod
    would stay Pending for ever under kube-default."""
    fleet_doc["policies"]["kube-default"]["instance_type"] = "m5.large"
    fleet_doc["workloads"][1]["memory_gib"] = 8
    with pytest.raises(InvalidRequest) as exc:
        run_simulation(parse_fleet(fleet_doc), parts, traces, policies=["kube-default"])
    assert _locs(exc) == [["policies", "kube-default", "instance_type"]]
    assert repr(fleet_doc["workloads"][1]["name"]) in exc.value.detail


def test_unknown_policy():
    with pytest.raises(InvalidRequest) as exc:
        check_policies(["kube-default", "magic"])
    assert _locs(exc) == [["policies", 1]]
    assert "magic" in exc.value.detail


@pytest.mark.parametrize(
    ("field", "value"), [("burst_spread", "sometimes"), ("burst_room", [1]), ("min_node_vcpus", -4)]
)
def test_bad_broker_burst_settings_name_the_field(fleet_doc, field, value):
    fleet_doc["policies"]["broker"][field] = value
    with pytest.raises(InvalidRequest) as exc:
        parse_fleet(fleet_doc)
    assert ["policies", "broker", field] in _locs(exc)
    assert f"policies.broker.{field}" in exc.value.detail


@pytest.mark.parametrize(("field", "value"), [("cg_rounds", 0), ("mip_nodes", -1), ("lns_turns", "many"), ("extra", 1)])
def test_bad_work_limits_name_the_field(fleet_doc, field, value):
    fleet_doc["policies"]["broker"]["work_limits"] = {field: value}
    with pytest.raises(InvalidRequest) as exc:
        parse_fleet(fleet_doc)
    assert ["policies", "broker", "work_limits", field] in _locs(exc)
