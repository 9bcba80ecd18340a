"""`broker migrate --revision`: an operator's way back to an older schema, which says what it drops
and does nothing without --confirm-downgrade (docs/operations.md, "Backup, restore and rollback")."""

from __future__ import annotations

import sqlalchemy as sa
from typer.testing import CliRunner

from broker.cli.exit_codes import EXIT_INVALID
from broker.cli.main import app


def _heads(url: str) -> set[str]:
    engine = sa.create_engine(url)
    with engine.connect() as c:
        heads = {str(r[0]) for r in c.execute(sa.text("SELECT version_num FROM alembic_version"))}
    engine.dispose()
    return heads


def test_a_downgrade_lists_what_it_drops_and_needs_confirmation(env: str) -> None:
    runner = CliRunner()
    before = _heads(env)
    refused = runner.invoke(app, ["migrate", "--revision", "0011"])
    assert refused.exit_code == EXIT_INVALID, refused.output
    assert all(f"  {rev}  " in refused.output for rev in ("0025", "0024", "0023", "0013", "0012")), refused.output
    assert "Back up first" in refused.output and "--confirm-downgrade" in refused.output
    assert _heads(env) == before  # nothing changed
    done = runner.invoke(app, ["migrate", "--revision", "0011", "--confirm-downgrade"])
    assert done.exit_code == 0, done.output
    assert "0011" in _heads(env)
    engine = sa.create_engine(env)
    assert "simulations" not in sa.inspect(engine).get_table_names()
    engine.dispose()
    again = runner.invoke(app, ["migrate"])
    assert again.exit_code == 0, again.output
    assert _heads(env) == before
    bad = runner.invoke(app, ["migrate", "--revision", "9999"])
    assert bad.exit_code == EXIT_INVALID and "invalid --revision" in bad.output
