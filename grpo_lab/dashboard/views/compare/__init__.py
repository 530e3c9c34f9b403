"""The Compare page: runs side by side, a sweep's variants with bands, completions across runs."""
