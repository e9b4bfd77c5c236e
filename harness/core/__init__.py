"""The harness's vocabulary, which every layer above may use and implementations/ too: queries and their
join specifications, declared parameters, typed failures, where data lives (the store), the record
basics (ids, provenance, atomic files) and the Java check. Imports nothing of the project's."""
