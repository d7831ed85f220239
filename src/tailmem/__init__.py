"""tailmem: how optimisers learn heavy-tailed associative memories (Muon vs Adam)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tailmem")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
