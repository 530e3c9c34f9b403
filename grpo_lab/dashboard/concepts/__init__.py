"""Helpers behind the concept pages: each demo's numbers (from trainer.objective) and its chart.

Pages in dashboard/app_pages/ stay thin: widgets in, these helpers' tables and charts out.
"""
