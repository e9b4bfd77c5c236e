"""Runs and what is made of them: the runner (one run, timed, measured, verified), workloads, the
contest, the gates, compare, tables, plots and the report. Imports every layer below; only the
command line (harness/cli.py) imports it."""
