"""tools/policies package."""
