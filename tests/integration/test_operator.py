"""The PlacementRequest operator against a local API server speaking the real wire format:
CRDs, admission, status with conflicts, events, finalizers, policies, watch restarts after 410, dispatch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from broker.app import Broker
from broker.operator import reconcile as rc
from broker.operator.controller import PlacementController
from broker.placements.request_documents import PlacementRequestIn
from tests.integration.dispatch_support import committed_docs, gitops_clusters, new_repo
from tests.integration.kube_crd_fake import CRD_DIR, FakeCustomResources, serve_fake_crs
from tests.integration.kube_fake import write_kubeconfig

NS = "default"  # the namespace is the broker tenant; "default" is the tenant the fixtures use


def request(name: str, **workload: Any) -> dict[str, Any]:
    w = {"name": "api", "replicas": 3, "cpu": 1.0, "memory_gib": 2.0, "residency": "gdpr-eu", **workload}
    return {
        "apiVersion": f"{rc.GROUP}/{rc.VERSION}",
        "kind": "PlacementRequest",
        "metadata": {"name": name},
        "spec": {"time_limit_s": 2, "workloads": [w]},
    }


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[tuple[FakeCustomResources, client.CustomObjectsApi, client.ApiClient]]:
    with serve_fake_crs() as (crs, url):
        api = config.new_client_from_config(config_file=str(write_kubeconfig(tmp_path / "kc.yaml", url, "hub")))
        yield crs, client.CustomObjectsApi(api), api


@pytest.fixture()
def running(
    broker: Broker, cluster: tuple[FakeCustomResources, client.CustomObjectsApi, client.ApiClient]
) -> Iterator[PlacementController]:
    _, _, api = cluster
    controller = PlacementController(broker, api, watch_timeout_s=2)
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    thread.start()
    yield controller
    stop.set()
    thread.join(timeout=10)


def wait_for(get: Callable[[], Any], ok: Callable[[Any], bool], timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = get()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; last value: {value}")
        time.sleep(0.1)


def get(objects: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    out: dict[str, Any] = objects.get_namespaced_custom_object(rc.GROUP, rc.VERSION, NS, rc.REQUESTS, name)
    return out


def printer_columns(obj: dict[str, Any]) -> dict[str, Any]:
    """What `kubectl get` shows for a PlacementRequest: each printer column's jsonPath read from the object."""
    crd = yaml.safe_load((CRD_DIR / "placementrequests.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    shown = {}
    for column in version["additionalPrinterColumns"]:
        value: Any = obj
        for key in column["jsonPath"].lstrip(".").split("."):
            value = value.get(key) if isinstance(value, dict) else None
        shown[column["name"]] = value
    return shown


def create(objects: client.CustomObjectsApi, body: dict[str, Any], plural: str = rc.REQUESTS) -> None:
    objects.create_namespaced_custom_object(rc.GROUP, rc.VERSION, NS, plural, body)


# ---- the CRDs ---------------------------------------------------------------------------


def _structural(schema: dict[str, Any], path: str) -> list[str]:
    """Every node has a type, except where the CRD rules let it go (preserve-unknown, int-or-string)."""
    problems = []
    exempt = schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-int-or-string")
    if "type" not in schema and not exempt:
        problems.append(f"{path}: no type")
    for key, sub in (schema.get("properties") or {}).items():
        problems += _structural(sub, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        problems += _structural(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        problems += _structural(schema["additionalProperties"], f"{path}{{}}")
    return problems


@pytest.mark.parametrize(
    "path", sorted(p for p in CRD_DIR.glob("*.yaml") if p.name != "kustomization.yaml"), ids=lambda p: p.name
)
def test_crds_are_schema_valid_and_structural(path: Path) -> None:
    crd = yaml.safe_load(path.read_text())
    kubernetes_validate.validate(crd, "1.31", strict=True)
    (version,) = crd["spec"]["versions"]
    assert _structural(version["schema"]["openAPIV3Schema"], "") == []
    assert version["additionalPrinterColumns"]
    if crd["spec"]["names"]["kind"] == "PlacementRequest":
        assert version["subresources"] == {"status": {}}


# where the CRD's spec differs from the request models on purpose: path -> why
SPEC_ONLY_IN_CRD = {".dispatch": "the operator's own field (reconcile.CONTROL_FIELDS)"}
NOT_REQUIRED_IN_CRD = {".name": "the operator fills it from the object (NAMESPACE.NAME)"}
NARROWED_IN_CRD = {
    ".dry_run": "enum [false]: a resource's placement is always stored",
    ".async": "enum [false]: the controller answers in status, there is no job",
    ".workloads[].requirements[].operator": "enum: the operators the model's validator accepts",
}
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength", "minItems", "maxItems", "pattern", "enum")


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-null alternatives a pydantic JSON-schema node allows, references followed."""
    if "$ref" in node:
        return _resolve(defs[node["$ref"].rsplit("/", 1)[1]], defs)
    if "anyOf" in node:
        return [alt for branch in node["anyOf"] for alt in _resolve(branch, defs) if alt.get("type") != "null"]
    return [node]


def _bounds(node: dict[str, Any], *, openapi: bool) -> dict[str, Any]:
    """A node's bounds, the CRD's OpenAPI v3.0 exclusiveMinimum (a flag on minimum) as JSON Schema's (a number)."""
    out = {k: node[k] for k in BOUNDS if k in node}
    if openapi and out.pop("exclusiveMinimum", False):
        out["exclusiveMinimum"] = out.pop("minimum")
    return out


def _drift(model: dict[str, Any], crd: dict[str, Any], defs: dict[str, Any], path: str) -> list[str]:
    """Where the CRD node `crd` would prune, refuse or leave optional what the request model `model` takes."""
    alts = _resolve(model, defs)
    types = {a.get("type") for a in alts}
    problems = []
    if crd.get("x-kubernetes-preserve-unknown-fields"):
        if len(alts) > 1:
            return []  # a name or an object (residency): structural schemas have no such type
        problems.append(f"{path}: preserve-unknown-fields where the model's fields can be spelled out")
    if crd.get("x-kubernetes-int-or-string"):
        return [] if types == {"integer", "string"} else [f"{path}: int-or-string, the model takes {types}"]
    if crd.get("type") not in types:
        return [f"{path}: type {crd.get('type')}, the model takes {types}"]
    if len(alts) > 1:
        return []  # a scalar union (requirement values): the CRD takes one of its types
    (node,) = alts
    if path not in NARROWED_IN_CRD and _bounds(node, openapi=False) != _bounds(crd, openapi=True):
        problems.append(f"{path}: bounds {_bounds(crd, openapi=True)}, the model's {_bounds(node, openapi=False)}")
    if node.get("type") == "array":
        problems += _drift(node["items"], crd.get("items") or {}, defs, f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        if "propertyNames" in node:  # a map with known keys: explicit properties in the CRD
            names = node["propertyNames"]["enum"]
            node = {"properties": dict.fromkeys(names, node["additionalProperties"])}
        else:
            problems += _drift(node["additionalProperties"], crd.get("additionalProperties") or {}, defs, f"{path}{{}}")
    if "properties" in node:
        props, crd_props = node["properties"], crd.get("properties") or {}
        for key, sub in props.items():
            if key not in crd_props:
                problems.append(f"{path}.{key}: missing (an API server prunes it)")
            else:
                problems += _drift(sub, crd_props[key], defs, f"{path}.{key}")
        for key in sorted(set(crd_props) - set(props)):
            if f"{path}.{key}" not in SPEC_ONLY_IN_CRD:
                problems.append(f"{path}.{key}: in the CRD, not in the request model")
        want = {k for k in node.get("required", []) if f"{path}.{k}" not in NOT_REQUIRED_IN_CRD}
        if want != set(crd.get("required", [])):
            problems.append(f"{path}: required {sorted(crd.get('required', []))}, the model's {sorted(want)}")
    return problems


def test_the_crd_spec_carries_the_request_contract() -> None:
    """Every field of the REST request models, with its type, bounds and required-ness, so an API
    server neither prunes a field the broker reads nor admits an object the broker then refuses."""
    crd = yaml.safe_load((CRD_DIR / "placementrequests.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    model = PlacementRequestIn.model_json_schema(mode="validation")
    assert _drift(model, spec, model["$defs"], "") == []


def test_admission_rejects_what_the_schema_can(cluster: Any) -> None:
    _, objects, _ = cluster
    with pytest.raises(ApiException) as err:
        create(objects, request("zero", replicas=0))
    assert err.value.status == 422
    assert "spec.workloads.0.replicas" in err.value.body
    # required where the broker requires it, not admitted and then refused
    with pytest.raises(ApiException) as err:
        create(objects, request("nodep", depends_on=[{"workload": "db"}]))
    assert err.value.status == 422 and "gib_per_hour" in err.value.body
    dry = request("dry")
    dry["spec"]["dry_run"] = True
    with pytest.raises(ApiException) as err:
        create(objects, dry)
    assert err.value.status == 422 and "spec.dry_run" in err.value.body


def test_the_contracts_extensions_reach_the_broker(broker: Broker, cluster: Any) -> None:
    _, objects, api = cluster
    body = request("full", spread={"min_sites": 1, "max_per_node": 1}, max_unavailable="50%")
    body["spec"] |= {"team": "web", "allow_over_budget": True, "reproducible": True, "max_moves": 3}
    create(objects, body)
    PlacementController(broker, api).reconcile(get(objects, "full"))
    status = get(objects, "full")["status"]
    assert status["phase"] == "Placed", status
    stored = broker.get_placement(status["placementId"]).request
    assert stored["team"] == "web" and stored["allow_over_budget"] and stored["reproducible"]
    assert stored["max_moves"] == 3
    assert stored["workloads"][0]["spread"]["max_per_node"] == 1 and stored["workloads"][0]["max_unavailable"] == "50%"


# ---- the controller ---------------------------------------------------------------------


def test_a_request_is_placed_and_its_status_fills_in(cluster: Any, running: PlacementController) -> None:
    crs, objects, _ = cluster
    create(objects, request("shop"))
    placed = wait_for(lambda: get(objects, "shop"), lambda o: (o.get("status") or {}).get("phase") == "Placed")
    status = placed["status"]
    assert status["observedGeneration"] == 1
    assert status["costPerHour"] > 0 and status["lowerBoundPerHour"] <= status["costPerHour"]
    assert status["placementId"].startswith("pl_")
    assert sum(w["replicas"] for w in status["workloads"]) == 3
    assert status["conditions"][0]["type"] == "Ready" and status["conditions"][0]["status"] == "True"
    assert rc.FINALIZER in placed["metadata"]["finalizers"]
    wait_for(lambda: [e for e in crs.events if e["involvedObject"]["name"] == "shop"], lambda e: e)
    assert crs.events[0]["reason"] == "Placed" and crs.events[0]["type"] == "Normal"

    # a spec change is answered again, for the new generation
    objects.patch_namespaced_custom_object(
        rc.GROUP,
        rc.VERSION,
        NS,
        rc.REQUESTS,
        "shop",
        {"spec": {"workloads": [{**request("x")["spec"]["workloads"][0], "replicas": 5}]}},
    )
    again = wait_for(lambda: get(objects, "shop"), lambda o: o["status"].get("observedGeneration") == 2)
    assert sum(w["replicas"] for w in again["status"]["workloads"]) == 5
    assert again["status"]["placementId"] != status["placementId"]

    # deletion waits for the finalizer, which the controller removes
    objects.delete_namespaced_custom_object(rc.GROUP, rc.VERSION, NS, rc.REQUESTS, "shop")
    wait_for(lambda: (rc.REQUESTS, NS, "shop") in crs.objects, lambda present: not present)


def test_a_new_request_is_solved_once(broker: Broker, cluster: Any, running: PlacementController) -> None:
    """The finalizer patch makes a MODIFIED event that still carries no status: it must not solve again."""
    crs, objects, _ = cluster
    create(objects, request("once"))
    wait_for(lambda: get(objects, "once"), lambda o: (o.get("status") or {}).get("phase") == "Placed")
    # events are handled in order: once a later object is answered, every event of "once" was seen
    create(objects, request("later"))
    wait_for(lambda: get(objects, "later"), lambda o: (o.get("status") or {}).get("phase") == "Placed")
    placements, total = broker.list_placements(name=f"{NS}.once")
    assert total == 1, [p.id for p in placements]
    assert [e["reason"] for e in crs.events if e["involvedObject"]["name"] == "once"] == ["Placed"]


def test_an_unwritten_answer_is_written_later_not_solved_again(broker: Broker, cluster: Any) -> None:
    crs, objects, api = cluster
    create(objects, request("flaky"))
    crs.conflicts = 99  # every status write conflicts until the controller gives up on this event
    controller = PlacementController(broker, api)
    with pytest.raises(ApiException):
        controller.reconcile(get(objects, "flaky"))
    crs.conflicts = 0
    controller.reconcile(get(objects, "flaky"))  # the next event writes the answer it has
    assert get(objects, "flaky")["status"]["phase"] == "Placed"
    assert broker.list_placements(name=f"{NS}.flaky")[1] == 1
    assert [e["reason"] for e in crs.events] == ["Placed"]


def test_an_invalid_spec_gets_a_condition_naming_the_field(cluster: Any, running: PlacementController) -> None:
    _, objects, _ = cluster
    create(objects, request("bad", residency="nowhere"))
    done = wait_for(lambda: get(objects, "bad"), lambda o: (o.get("status") or {}).get("phase") == "Invalid")
    assert "spec.workloads[0].residency" in done["status"]["message"]
    assert done["status"]["conditions"][0]["reason"] == "InvalidSpec"


def test_infeasible_names_the_conflicting_constraints(cluster: Any, running: PlacementController) -> None:
    _, objects, _ = cluster
    body = request("far", latency_slo_ms={"tokyo": 1.0})
    body["spec"]["user_regions"] = [{"name": "tokyo", "lat": 35.68, "lon": 139.69}]
    create(objects, body)
    done = wait_for(lambda: get(objects, "far"), lambda o: (o.get("status") or {}).get("phase") == "Infeasible")
    assert "latency_slo_ms:tokyo" in done["status"]["message"]


def test_a_status_conflict_is_retried(broker: Broker, cluster: Any) -> None:
    crs, objects, api = cluster
    create(objects, request("busy"))
    crs.conflicts = 1
    controller = PlacementController(broker, api)
    controller.reconcile(get(objects, "busy"))  # adds the finalizer, solves, writes status
    assert get(objects, "busy")["status"]["phase"] == "Placed"
    assert crs.status_writes == 2  # the first write got 409, the retry on the fresh object landed


def test_the_namespace_policy_fills_what_the_request_leaves_out(cluster: Any, running: PlacementController) -> None:
    _, objects, _ = cluster
    policy = {
        "apiVersion": f"{rc.GROUP}/{rc.VERSION}",
        "kind": "PlacementPolicy",
        "metadata": {"name": "defaults"},
        "spec": {"residency": "us-only", "capacityTypes": ["ondemand"]},
    }
    create(objects, policy, rc.POLICIES)
    body = request("us")
    del body["spec"]["workloads"][0]["residency"]
    create(objects, body)
    done = wait_for(lambda: get(objects, "us"), lambda o: (o.get("status") or {}).get("phase") == "Placed")
    sites = {s for w in done["status"]["workloads"] for s in w["sites"]}
    assert sites and all(s.split(":")[0] in ("aws", "azure", "gcp") for s in sites)
    assert all(p["pool"].endswith("/ondemand") for p in done["status"]["pools"])


def test_a_bad_policy_is_named_not_the_request(broker: Broker, cluster: Any) -> None:
    _, objects, api = cluster
    policy = {"apiVersion": f"{rc.GROUP}/{rc.VERSION}", "kind": "PlacementPolicy", "metadata": {"name": "p"}}
    create(objects, policy | {"spec": {"residency": "nope"}}, rc.POLICIES)
    body = request("innocent")
    del body["spec"]["workloads"][0]["residency"]
    body["spec"]["workloads"].append({**body["spec"]["workloads"][0], "name": "db"})
    create(objects, body)
    PlacementController(broker, api).reconcile(get(objects, "innocent"))
    status = get(objects, "innocent")["status"]
    assert status["phase"] == "Invalid" and status["conditions"][0]["reason"] == "InvalidPolicy"
    # named once, though it failed for both workloads it filled
    assert status["message"].startswith(f"PlacementPolicy {NS}/p spec.residency: ")
    assert "unknown policy 'nope'" in status["message"] and "spec.workloads" not in status["message"]
    assert status["message"].count("PlacementPolicy") == 1

    # a request's own bad field is still the request's
    create(objects, request("guilty", residency="nowhere"))
    PlacementController(broker, api).reconcile(get(objects, "guilty"))
    status = get(objects, "guilty")["status"]
    assert status["conditions"][0]["reason"] == "InvalidSpec" and "spec.workloads[0].residency" in status["message"]


def test_a_policy_cost_limit_fails_the_request_and_stores_nothing(broker: Broker, cluster: Any) -> None:
    _, objects, api = cluster
    limit = {"apiVersion": f"{rc.GROUP}/{rc.VERSION}", "kind": "PlacementPolicy", "metadata": {"name": "cap"}}
    create(objects, limit | {"spec": {"maxCostPerHour": 0.0001}}, rc.POLICIES)
    create(objects, request("dear"))
    PlacementController(broker, api).reconcile(get(objects, "dear"))
    status = get(objects, "dear")["status"]
    assert status["phase"] == "Failed" and status["conditions"][0]["reason"] == "OverBudget"
    assert broker.list_placements()[1] == 0


def test_the_watch_restarts_after_410_gone(cluster: Any, running: PlacementController) -> None:
    crs, objects, _ = cluster
    create(objects, request("first"))
    wait_for(lambda: get(objects, "first"), lambda o: (o.get("status") or {}).get("phase") == "Placed")
    before = running.relists
    crs.compact()  # the version the watch resumes from is gone
    create(objects, request("second"))
    wait_for(lambda: get(objects, "second"), lambda o: (o.get("status") or {}).get("phase") == "Placed")
    wait_for(lambda: running.relists, lambda n: n > before)


def test_dispatch_true_sends_the_placement_to_the_sites_clusters(
    broker: Broker, cluster: Any, running: PlacementController, tmp_path: Path
) -> None:
    _, objects, _ = cluster
    create(objects, request("ship"))
    placed = wait_for(lambda: get(objects, "ship"), lambda o: (o.get("status") or {}).get("phase") == "Placed")
    repo = new_repo(tmp_path / "gitops")
    gitops_clusters(broker, repo, {s for w in placed["status"]["workloads"] for s in w["sites"]}, namespace="shop")
    objects.patch_namespaced_custom_object(rc.GROUP, rc.VERSION, NS, rc.REQUESTS, "ship", {"spec": {"dispatch": True}})
    done = wait_for(lambda: get(objects, "ship"), lambda o: o["status"].get("observedGeneration") == 2)
    assert done["status"]["phase"] == "Dispatched", done["status"]
    assert done["status"]["dispatched"] is True and done["status"]["dispatchId"].startswith("dp_")
    assert printer_columns(done)["Dispatched"] is True
    deployments = [d for docs in committed_docs(repo).values() for d in docs if d["kind"] == "Deployment"]
    assert sum(d["spec"]["replicas"] for d in deployments) == 3


def test_a_failed_dispatch_keeps_the_placement_in_status(
    broker: Broker, cluster: Any, running: PlacementController
) -> None:
    crs, objects, _ = cluster
    body = request("nowhere")
    body["spec"]["dispatch"] = True  # no cluster is registered for any site
    create(objects, body)
    done = wait_for(lambda: get(objects, "nowhere"), lambda o: (o.get("status") or {}).get("phase") == "Failed")
    status = done["status"]
    assert status["conditions"][0]["reason"] == "DispatchFailed" and status["conditions"][0]["status"] == "False"
    assert "no cluster is registered for site" in status["message"] and "spec." not in status["message"]
    (stored,), _ = broker.list_placements(name=f"{NS}.nowhere")
    assert status["placementId"] == stored.id and status["placementId"] in status["message"]
    assert status["costPerHour"] == stored.cost_per_hour and sum(w["replicas"] for w in status["workloads"]) == 3
    assert status["dispatched"] is False and printer_columns(done)["Dispatched"] is False
    wait_for(lambda: [e for e in crs.events if e["involvedObject"]["name"] == "nowhere"], lambda e: e)
    assert crs.events[0]["reason"] == "DispatchFailed" and crs.events[0]["type"] == "Warning"
