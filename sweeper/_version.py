"""sweeper's version, in a module of its own: the package's initialiser names its API, which
the modules reading the version must not import."""

__version__ = "0.1.0"
