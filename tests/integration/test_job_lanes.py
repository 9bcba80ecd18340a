"""One job mechanism for every kind (broker/jobs/kinds.py): a price refresh is a job like a
placement, and on the API process's threads it runs on its own lane, never behind a solve."""

from __future__ import annotations

import threading

from broker.app import Broker
from broker.jobs.kinds import KINDS
from broker.jobs.price_refresh import KIND_PRICE_REFRESH, LANE
from broker.jobs.queue import InProcessQueue
from broker.jobs.store import JobStore


def test_every_kind_of_job_is_in_the_one_table() -> None:
    assert set(KINDS) == {"placement", "simulation", KIND_PRICE_REFRESH}
    assert KINDS[KIND_PRICE_REFRESH].lane == LANE and KINDS["placement"].lane == ""


def test_a_price_refresh_does_not_wait_behind_a_running_solve(broker: Broker) -> None:
    store = JobStore(broker.sessions)
    solve = store.create(tenant="default", request={})
    refresh = store.create(tenant="default", request={}, kind=KIND_PRICE_REFRESH)
    release, refreshed = threading.Event(), threading.Event()

    def run(_broker: Broker, job_id: str) -> str:
        if job_id == solve["id"]:
            release.wait(10)  # a long solve holds the default lane's one thread
        else:
            refreshed.set()
        return "succeeded"

    queue = InProcessQueue(broker, run, lanes={KIND_PRICE_REFRESH: LANE})
    try:
        queue.enqueue(solve["id"])
        queue.enqueue(refresh["id"], LANE)
        assert refreshed.wait(5), "the refresh waited behind the solve"
    finally:
        release.set()
        queue.close()


def test_queued_jobs_recovered_at_start_keep_their_lane(broker: Broker) -> None:
    store = JobStore(broker.sessions)
    solve = store.create(tenant="default", request={})
    store.create(tenant="default", request={}, kind=KIND_PRICE_REFRESH)
    release, refreshed = threading.Event(), threading.Event()

    def run(_broker: Broker, job_id: str) -> str:
        if job_id == solve["id"]:
            release.wait(10)
        else:
            refreshed.set()
        return "succeeded"

    queue = InProcessQueue(broker, run, lanes={KIND_PRICE_REFRESH: LANE})
    try:
        assert queue.recover() == 2
        assert refreshed.wait(5), "the recovered refresh waited behind the solve"
    finally:
        release.set()
        queue.close()
