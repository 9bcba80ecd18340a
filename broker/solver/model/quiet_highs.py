"""HiGHS instances that write nothing to the process's stdout.

highspy's constructor installs its callback before a caller can set any option, and HiGHS
logs its banner ("Running HiGHS ... Copyright ...") to stdout on that first call unless
`output_flag` is already off. On stdout the banner corrupts the documents the CLI prints
(`broker place --format json`), so every model of the solver starts from this class.

Some highspy releases ship type stubs and some do not (pip's resolver picks either, as the
other packages allow): the type-ignore comments below hold for both.
"""

from __future__ import annotations

import highspy


class QuietHighs(highspy.Highs):  # type: ignore[misc,unused-ignore]
    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call,unused-ignore]

    def enableCallbacks(self) -> None:
        # highspy.Highs.__init__ calls this before returning: the first point where an option
        # can be set on the new instance, and still before HiGHS logs anything
        self.setOptionValue("output_flag", False)
        super().enableCallbacks()  # type: ignore[no-untyped-call,unused-ignore]
