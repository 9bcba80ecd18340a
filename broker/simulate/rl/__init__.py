"""The learned scheduler: a PPO placement policy over the fleet simulator (docs/simulate.md)."""
