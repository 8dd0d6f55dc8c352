"""The results on disk: every file sweeper writes or reads, and nothing else touches the disk.

`schema` (the canonical Arrow schema, its version, a point's identity), `files` (names and the
one atomic write), `journal` and `writer` (rows as they come), `records` (a run's record under
`_runs/`), `summaries` (nightly summary JSON), `scans` (a scan's summary, beside its record),
`prometheus` (a run's figures as textfiles for node_exporter), `load` (reading rows back) and
`upgrade` (the one place that knows rows older sweepers wrote).
"""
