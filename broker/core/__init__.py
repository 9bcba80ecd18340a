"""The pure domain: types, data-residency rules, the latency model and the columnar pool table.

No I/O, no settings, no database: everything here is imported by the solver and the services alike.
"""
