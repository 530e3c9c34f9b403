"""The math every floor shares: the trainer, the importers, the dashboard and its concept pages.

`options` holds the named choices and their rules without importing torch (the dashboard's readers
use it on every page); `functions` holds the objective as pure tensor functions.
"""
