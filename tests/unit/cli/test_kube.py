"""A kubeconfig that is missing, not YAML or not a kubeconfig is a message naming the file and
exit 2, never a traceback (broker operator, kueue-dispatcher, ocm publish)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.kube import kube_api


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "does not exist"),
        ("garbage: [\n", "not valid YAML or JSON (line 2, column 1)"),
        ("- a list\n", "this is not a kubeconfig"),
        ("just text\n", "this is not a kubeconfig"),  # as /etc/hostname: the client said "TypeError: 'str' ..."
        ("apiVersion: v1\n", "clusters: must be a non-empty list"),
    ],
)
def test_a_bad_kubeconfig_is_named_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, said: str
) -> None:
    path = tmp_path / "hub.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(typer.Exit) as exc:
        kube_api(path, None)
    assert exc.value.exit_code == EXIT_INVALID
    err = capsys.readouterr().err
    assert str(path) in err and said in err and "Traceback" not in err


def test_outside_a_cluster_without_a_kubeconfig_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as exc:
        kube_api(None, None)
    assert exc.value.exit_code == EXIT_INVALID
    assert "service account" in capsys.readouterr().err
