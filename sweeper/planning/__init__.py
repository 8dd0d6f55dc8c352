"""Pure planning, in the driver's process: the spec, sizes and dtypes, where ranks sit and
the groups they form, the schedule, memory sizing and the duration estimate. Imports neither
torch nor Ray, so every piece is tested as plain functions on plain data.
"""
