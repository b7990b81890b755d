"""tools/builtin package."""
