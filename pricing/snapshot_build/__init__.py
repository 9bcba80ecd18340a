"""The offline builder of the bundled catalog snapshot, one module per output concern.

The command is `python -m pricing.build_snapshot`; it must not import ``broker`` (pricing is the bottom layer).
"""
