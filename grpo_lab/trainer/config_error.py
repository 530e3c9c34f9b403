"""The error a refused option raises: its own module, so that a module config.py calls (fork.py) can
raise it without importing config.py back (tests/test_layers.py holds the package free of import cycles).
Importers name it from config.py, which re-exports it."""


class ConfigError(ValueError):
    """A config value is not allowed; the message names the field and what is allowed."""
