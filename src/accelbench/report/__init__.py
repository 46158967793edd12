"""Human-facing output: tables (rich) and charts (matplotlib). Only this package formats or rounds."""
