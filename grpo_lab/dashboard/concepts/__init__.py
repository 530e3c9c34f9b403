"""Helpers behind the concept pages: each demo's numbers (from grpo_lab.objective) and its chart.

Pages in dashboard/app_pages/ stay thin: widgets in, these helpers' tables and charts out.
"""
