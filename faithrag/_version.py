"""The package's version, in a module of its own so that any module can read it without
importing the package's public API (faithrag/__init__.py)."""

__version__ = "0.1.0"
