"""The exit codes of every `broker` command: one map, so a pipeline reads them the same way everywhere.

Documented in docs/cli.md; 0/2/3/4 are the contract's codes for `broker place`.
"""

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and failed (a refresh that kept the old prices, a dispatch that did not apply)
EXIT_INVALID = 2  # invalid input: a file, an option or a request document; nothing stored
EXIT_INFEASIBLE = 3  # no placement satisfies every hard constraint
EXIT_OVER_LIMIT = 4  # over a cost limit or a budget
EXIT_UNREACHABLE = 5  # --server names a broker that cannot be reached, or something that is not a broker
