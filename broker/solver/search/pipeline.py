"""Finding the placement and proving its quality over the whole catalog, phase by phase.

1. Column generation (column_generation.py): the LP over every candidate (class, pool) column,
   grown from a small start until nothing outside it could lower it, or until the MIPs need
   the time. Beside it, on big requests, the node-share bound in a thread (bounds/).
2. The first incumbent (incumbent.py): the best feasible start or the LP rounded. Before column
   generation (whose first master gets their columns) one or two more starts: every class that
   needs one site on its cheapest share of a fully used node (share_start.py), and with
   dependencies the cheapest start with its dependency components co-located (co_location.py).
3. Neighbourhoods (neighbourhoods.py): RENS over the LP's support, the second neighbourhood
   over the LP's pools, large-neighbourhood search; each a small MIP warm-started from the
   incumbent.
4. The final MIP (final_mip.py): reduced-cost inclusion and the MIP over the restricted model,
   and the lower bound: the LP's (or the MIP's) once CG converged, else the Lagrangian or the
   node-share bound.

The phases share one SearchState (state.py); every knob comes from SolverOptions.
"""

from __future__ import annotations

from broker.solver.model.layout import ModelInput
from broker.solver.options import SolverOptions
from broker.solver.search.column_generation import column_generation, start, start_share_bound
from broker.solver.search.final_mip import final_mip, result
from broker.solver.search.incumbent import co_located_start, first_incumbent
from broker.solver.search.neighbourhoods import large_neighbourhoods, rens_and_second
from broker.solver.search.share_start import with_share_start
from broker.solver.search.state import SearchResult
from broker.solver.types import ClassPlacement


def search(
    mi: ModelInput,
    *,
    starts: list[ClassPlacement],
    time_limit_s: float,
    seed: int,
    options: SolverOptions | None = None,
    prove: bool = True,
) -> SearchResult | None:
    """The placement of `mi` within time_limit_s, from the start placements `starts` (None when
    there is none). prove=False: no bound beyond the LP's and the MIPs' (a group of split.py,
    whose bound is the whole request's): no bound threads, no Lagrangian bound."""
    opts = options if options is not None else SolverOptions()
    st = start(mi, starts, time_limit_s=time_limit_s, seed=seed, opts=opts, prove=prove)
    starts = with_share_start(st, starts)
    starts = [*starts, *co_located_start(st, starts)]
    column_generation(st)
    start_share_bound(st)
    first_incumbent(st, starts)
    rens_and_second(st)
    large_neighbourhoods(st)
    found = result(st) if final_mip(st) else None
    if found is None:
        st.no_bound_needed.set()  # the relaxed bound's thread ends early
        st.hurry.set()
    return found
