"""The ground floor every layer shares, importing nothing of accelbench above it: the spec and its cases, errors,
statuses and run kinds, statistics, intervals, timing, roofline and scaling maths, the analytic counts, the device.
No torch import at module level. THE sweep loop and the derived columns are one floor up (:mod:`accelbench.sweep`)."""
