import sys

from harness.cli import entry_point

sys.exit(entry_point())
