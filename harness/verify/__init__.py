"""Independent checks of a count: the oracles (which share no code with implementations/), the peer
systems `compare` runs, the check of a run's count and the recount of a dynamic run. Imports
harness.core and harness.data, never implementations/."""
