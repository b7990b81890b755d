"""The installed distribution's version, read from its metadata (one source of truth: pyproject.toml)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("react-graph")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
