"""Studies: compositions of runs. :mod:`~accelbench.studies.scale` runs one sweep on 1, 2, 4, ... processes
in one run (speed-up, scaling efficiency); :mod:`~accelbench.studies.concurrent` runs several jobs at once on
disjoint GPU sets, then one after another, and compares them."""
