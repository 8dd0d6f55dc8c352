"""The fleet scan's pure core: its records (`fleet`), the next wave from the results so far
(`policy`), a group's rows -> its outcome (`rows`), outcomes -> verdicts (`judge`, inside a
node and across nodes; `thresholds`, `reference`), and a simulated fleet timed by a cost model
(`simulate`). Imports neither Ray nor torch, so the same code drives a real scan and a
simulation.
"""
