"""The core every scenario shares: the spec and its cases, THE sweep loop, timing, statistics, derived
columns (energy, validity, cost), the environment, errors and exit codes. No torch import at module level."""
