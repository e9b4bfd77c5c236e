"""Check that Java 17+ is available for Spark 4 (stdlib only, so it runs before the venv exists)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

MIN_JAVA = 17

HOW_TO_INSTALL = (
    "Spark 4 needs Java {min} or newer. Install it, e.g. `sudo apt-get install openjdk-17-jre-headless` "
    "(Debian/Ubuntu) or `brew install openjdk@17` (macOS), then make `java` visible on PATH or set JAVA_HOME."
)


def java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def java_version() -> tuple[int, str] | None:
    """(major version, version string) of the Java Spark will use, or None if there is none."""
    binary = java_binary()
    if binary is None:
        return None
    try:
        out = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = out.stderr + out.stdout
    match = re.search(r'version "(\d+)(?:\.(\d+))?[^"]*"', text)
    if not match:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0" style
        major = int(match.group(2))
    return major, match.group(0)


def problem() -> str | None:
    """A one-line explanation if Java is missing or too old, else None."""
    found = java_version()
    if found is None:
        return "no Java runtime found. " + HOW_TO_INSTALL.format(min=MIN_JAVA)
    major, text = found
    if major < MIN_JAVA:
        return f"found Java {major} ({text}). " + HOW_TO_INSTALL.format(min=MIN_JAVA)
    return None


def main() -> int:
    msg = problem()
    if msg:
        print(f"error: {msg}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
