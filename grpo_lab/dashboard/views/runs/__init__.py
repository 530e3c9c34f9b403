"""The Runs page: the list, its filters, management (delete, archive, tags), sweeps."""
