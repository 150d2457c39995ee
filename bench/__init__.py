"""The benchmark harness of issue 9: lakeops against its peers and the hardware limit, in one run.

``python -m bench --size quick`` generates each workload once, restores an identical copy of it
before every run, alternates ours / peer / limit over the repeats, and writes medians, ratios and
peak memory to ``bench/results/<date>.json`` and a summary table into ``bench/README.md``.
"""
