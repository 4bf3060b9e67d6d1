"""The benchmark suite: seeding, load runs with wrk, and the results report (``bench/run``)."""
