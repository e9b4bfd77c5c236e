"""The distributed indices the BiGJoin family builds and reads: one list per key at its owner
(distributed), split by key and list (balanced), long lists cut into blocks (block) and versioned
under updates (versioned). Imports implementations.gj and harness.core."""
